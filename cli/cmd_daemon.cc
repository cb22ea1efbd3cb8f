// hugepin daemon status|list|create|destroy: requests to hugepind over its socket.
#include <iostream>

#include "base/options.h"
#include "base/size.h"
#include "base/table.h"
#include "cli/command.h"
#include "daemon/client.h"
#include "daemon/protocol.h"

namespace hugepin::cli {
namespace {

struct SocketArgs {
  std::string socket;
  bool json = false;
};

void add_socket_options(CLI::App* command, SocketArgs& args) {
  command->add_option("--socket", args.socket, "hugepind's socket (default: HUGEPIN_SOCKET, else /run/hugepin/hugepind.sock)");
  command->add_flag("--json", args.json, "Print hugepind's reply as JSON (documented in docs/commands.md)");
}

// Sends `request` and returns the reply; a refusal or failure is an Error with hugepind's message.
daemon::Json ask(Os& os, const SocketArgs& args, const daemon::Json& request) {
  const std::string path = args.socket.empty() ? daemon::default_socket_path(environment_source()) : args.socket;
  daemon::DaemonClient client = daemon::DaemonClient::connect(os, path);
  daemon::Json reply = client.request(request);
  if (!reply.value("ok", false)) throw Error(cat("hugepind: ", reply.value("error", std::string("no reason given"))));
  return reply;
}

daemon::Json simple_request(daemon::Operation op) {
  daemon::Request request;
  request.op = op;
  return daemon::request_json(request);
}

void print_status(const daemon::Json& reply) {
  const daemon::Json& d = reply.at("daemon");
  const daemon::Json& arenas = reply.at("arenas");
  const daemon::Json& requests = reply.at("requests");
  const daemon::Json& reaper = reply.at("reaper");
  const daemon::Json& settings = reply.at("settings");
  std::cout << "hugepind " << d.at("version").get<std::string>() << ", pid " << d.at("pid") << ", up "
            << static_cast<int64_t>(d.at("uptime_seconds").get<double>()) << " s, socket " << d.at("socket").get<std::string>()
            << "\n"
            << d.at("status").get<std::string>() << "\n"
            << "arenas: " << arenas.at("managed") << " managed (" << arenas.at("owned") << " owned, " << arenas.at("unowned")
            << " without owner, " << arenas.at("inconsistent") << " inconsistent, " << arenas.at("inaccessible")
            << " inaccessible); at start " << arenas.at("adopted_at_start") << " adopted, "
            << arenas.at("quarantined_at_start") << " quarantined\n"
            << "quarantine: " << reply.at("quarantined") << " entries; stale: " << reply.at("stale") << " arenas\n"
            << "requests: " << requests.at("ok") << " ok, " << requests.at("error") << " failed, " << requests.at("refused")
            << " refused; " << reply.at("connections") << " connections open\n"
            << "reaper: " << reaper.at("passes") << " passes, " << reaper.at("ranks_marked_dead") << " ranks marked dead, "
            << reaper.at("arenas_expired") << " arenas expired, " << reaper.at("stale_removed") << " stale removed\n"
            << "settings: retention " << settings.at("retention").get<std::string>() << ", remove_stale "
            << (settings.at("remove_stale").get<bool>() ? "yes" : "no") << ", stale_grace "
            << settings.at("stale_grace").get<std::string>() << ", teardown_on_stop "
            << (settings.at("teardown_on_stop").get<bool>() ? "yes" : "no") << ", group '"
            << settings.at("group").get<std::string>() << "', arena_prefix '" << settings.at("arena_prefix").get<std::string>()
            << "'\n";
}

void print_list(const daemon::Json& reply) {
  if (reply.at("arenas").empty()) {
    std::cout << "no arenas\n";
  } else {
    Table table({"ARENA", "HEALTH", "RANKS", "BYTES", "LIVE", "DEAD", "OWNED", "UNOWNED", "GEN", "OWNER", "MODE"},
                {Table::Align::kLeft, Table::Align::kLeft, Table::Align::kRight, Table::Align::kRight,
                 Table::Align::kRight, Table::Align::kRight, Table::Align::kLeft, Table::Align::kRight,
                 Table::Align::kRight, Table::Align::kRight, Table::Align::kRight});
    for (const daemon::Json& arena : reply.at("arenas")) {
      table.add_row({arena.at("name").get<std::string>(), arena.at("health").get<std::string>(),
                     std::to_string(arena.at("ranks").get<uint32_t>()), format_bytes(arena.at("bytes").get<uint64_t>()),
                     std::to_string(arena.at("live_workers").get<uint32_t>()),
                     std::to_string(arena.at("dead_ranks").get<uint32_t>()), arena.at("owned").get<bool>() ? "yes" : "no",
                     cat(static_cast<int64_t>(arena.at("unowned_seconds").get<double>()), "s"),
                     std::to_string(arena.at("generation").get<uint64_t>()),
                     std::to_string(arena.at("owner_uid").get<uint32_t>()), arena.at("mode").get<std::string>()});
    }
    std::cout << table.render();
    for (const daemon::Json& arena : reply.at("arenas")) {
      if (arena.contains("reason")) std::cout << arena.at("name").get<std::string>() << ": " << arena.at("reason").get<std::string>() << "\n";
    }
  }
  for (const daemon::Json& flight : reply.at("in_flight")) {
    std::cout << "in flight: " << flight.at("op").get<std::string>() << " " << flight.at("arena").get<std::string>() << "\n";
  }
  for (const daemon::Json& stale : reply.at("stale")) {
    std::cout << "stale: " << stale.at("arena").get<std::string>() << " (" << stale.at("kind").get<std::string>() << ", "
              << static_cast<int64_t>(stale.at("age_seconds").get<double>()) << " s old)\n";
  }
  for (const daemon::Json& entry : reply.at("quarantined")) {
    std::cout << "quarantined: " << entry.at("arena").get<std::string>() << " in " << entry.at("path").get<std::string>()
              << ": " << entry.at("reason").get<std::string>() << "\n";
  }
}

// `hugepin daemon status` and `list`: one request without arguments, the reply printed by `print`.
int ask_and_print(Os& os, const SocketArgs& args, daemon::Operation op, void (*print)(const daemon::Json&)) {
  daemon::Json reply = ask(os, args, simple_request(op));
  if (args.json) {
    print_json(reply);
  } else {
    print(reply);
  }
  return 0;
}

void add_daemon_status(CLI::App& command, Context& context) {
  auto args = std::make_shared<SocketArgs>();
  CLI::App* status = command.add_subcommand("status", "hugepind's state: arenas, quarantine, stale files, requests");
  add_socket_options(status, *args);
  run_when_chosen(status, context, [&context, args] {
    return ask_and_print(context.os(), *args, daemon::Operation::kStatus, print_status);
  });
}

void add_daemon_list(CLI::App& command, Context& context) {
  auto args = std::make_shared<SocketArgs>();
  CLI::App* list = command.add_subcommand("list", "The arenas hugepind manages, stale files and quarantine");
  add_socket_options(list, *args);
  run_when_chosen(list, context, [&context, args] {
    return ask_and_print(context.os(), *args, daemon::Operation::kList, print_list);
  });
}

struct CreateArgs {
  SocketArgs socket;
  std::string name;
  std::string size;
  uint32_t ranks = 0;
  std::string chunk = "2M";
  std::string page_size = "auto";
  std::optional<int> node;
  std::string group;
};

int daemon_create(Os& os, const CreateArgs& args) {
  daemon::Request request;
  request.op = daemon::Operation::kCreate;
  request.name = args.name;
  request.size = size_value(args.size);
  request.ranks = args.ranks;
  request.chunk = size_value(args.chunk);
  request.page_size = page_size_value(args.page_size);
  request.node = args.node;
  request.group = args.group;
  daemon::Json reply = ask(os, args.socket, daemon::request_json(request));
  if (args.socket.json) {
    print_json(reply);
  } else {
    const daemon::Json& arena = reply.at("arena");
    std::cout << "hugepind created arena '" << arena.at("name").get<std::string>() << "': "
              << arena.at("regions").size() << " regions, control segment " << arena.at("segment").get<std::string>()
              << ", mode " << arena.at("mode").get<std::string>() << "\n";
  }
  return 0;
}

void add_daemon_create(CLI::App& command, Context& context) {
  auto args = std::make_shared<CreateArgs>();
  CLI::App* create = command.add_subcommand("create", "Have hugepind create (and own) an arena");
  create->add_option("NAME", args->name, "Arena name")->required();
  create->add_option("--size", args->size, "Total bytes, split evenly over the ranks")->required()->check(size_validator());
  create->add_option("--ranks", args->ranks, "Number of rank regions")->required()->check(CLI::Range(1, 65536));
  create->add_option("--chunk", args->chunk, "Chunk size")->check(size_validator());
  create->add_option("--pagesize", args->page_size, "Page size (auto: 1G, then 2M, then 4K shared memory)")
      ->check(page_size_validator(true));
  create->add_option("--node", args->node, "Bind every region to this NUMA node")->check(CLI::NonNegativeNumber);
  create->add_option("--group", args->group, "Share the arena with this group (one of yours) instead of hugepind's");
  add_socket_options(create, args->socket);
  run_when_chosen(create, context, [&context, args] { return daemon_create(context.os(), *args); });
}

struct DestroyArgs {
  SocketArgs socket;
  std::string name;
};

int daemon_destroy(Os& os, const DestroyArgs& args) {
  daemon::Request request;
  request.op = daemon::Operation::kDestroy;
  request.name = args.name;
  daemon::Json reply = ask(os, args.socket, daemon::request_json(request));
  if (args.socket.json) {
    print_json(reply);
  } else {
    const daemon::Json& destroyed = reply.at("destroyed");
    std::cout << "hugepind destroyed arena '" << destroyed.at("name").get<std::string>() << "' ("
              << destroyed.at("region_files") << " region files"
              << (destroyed.at("control_removed").get<bool>() ? ", control segment" : "") << ")\n";
  }
  return 0;
}

void add_daemon_destroy(CLI::App& command, Context& context) {
  auto args = std::make_shared<DestroyArgs>();
  CLI::App* destroy = command.add_subcommand("destroy", "Have hugepind destroy an arena");
  destroy->add_option("NAME", args->name, "Arena name")->required();
  add_socket_options(destroy, args->socket);
  run_when_chosen(destroy, context, [&context, args] { return daemon_destroy(context.os(), *args); });
}

}  // namespace

void add_daemon_commands(CLI::App& app, Context& context) {
  CLI::App* command = app.add_subcommand("daemon", "Ask hugepind (the daemon) for its status, its arenas, or an arena");
  command->require_subcommand(1);
  add_daemon_status(*command, context);
  add_daemon_list(*command, context);
  add_daemon_create(*command, context);
  add_daemon_destroy(*command, context);
}

}  // namespace hugepin::cli
