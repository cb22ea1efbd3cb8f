// hugepin inspect [NAME] [--json] [--watch SECONDS] and hugepin metrics [NAME]: read-only views
// of the control segments in /dev/shm. They open segments read-only, take no lock, write nothing.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <iostream>
#include <thread>

#include "base/options.h"
#include "cli/command.h"
#include "cli/inspect_view.h"
#include "cli/shim_view.h"
#include "ipc/doorbell.h"
#include "ipc/inspect.h"
#include "ipc/metrics.h"
#include "shim/shim_registry.h"

namespace hugepin::cli {
namespace {

struct InspectArgs {
  std::string name;
  bool json = false;
  double watch_seconds = 0;
  uint64_t count = 0;  // samples under --watch; 0: until interrupted
};

// One arena (an unknown one is an error) or every arena.
std::vector<InspectEntry> take_sample(Os& os, const std::string& name) {
  if (name.empty()) return inspect_arenas(os);
  return {InspectEntry{name, inspect_arena(os, name), ""}};
}

RatesByArena rates_between(const std::vector<InspectEntry>& before, const std::vector<InspectEntry>& after) {
  RatesByArena rates;
  for (const InspectEntry& now : after) {
    for (const InspectEntry& then : before) {
      if (now.snapshot && then.snapshot && now.name == then.name) rates[now.name] = ring_rates(*then.snapshot, *now.snapshot);
    }
  }
  return rates;
}

// Where arena data and the shim's tables are: HUGEPIN_SHM_DIR, as the shim reads it.
ArenaOptions data_dirs() {
  std::vector<std::string> problems;  // a bad HUGEPIN_* value is `hugepin shim env`'s to report
  Options options = Options::parse(environment_source(), &problems);
  ArenaOptions where;
  where.shm_dir = options.text(Option::kShmDir);
  return where;
}

void print_sample(Os& os, const std::vector<InspectEntry>& entries, const RatesByArena& rates,
                  const InspectArgs& args) {
  const int64_t now = os.monotonic_ns();
  const ArenaOptions where = data_dirs();
  // The processes the LD_PRELOAD shim serves (their tables sit beside the control segments): each
  // rank one holds shows it, and every arena shown lists them all.
  std::vector<ShimTable> shim = list_shim_tables(os, where.shm_dir);
  const ShimHoldersByArena holders = shim_holders(os, entries, shim, where);
  if (!args.name.empty()) shim.clear();
  if (args.json) {
    Json json = inspect_json(entries, rates, holders, now);
    if (args.name.empty()) json["shim"] = shim_tables_json(shim)["processes"];
    // Under --watch, one compact document per line (JSON Lines); otherwise indented.
    if (args.watch_seconds > 0) {
      std::cout << json.dump() << std::endl;
    } else {
      print_json(json);
    }
    return;
  }
  if (args.watch_seconds > 0 && isatty(STDOUT_FILENO) != 0) std::cout << "\033[H\033[2J";
  std::cout << inspect_text(entries, rates, holders, now);
  if (!shim.empty()) std::cout << "\nLD_PRELOAD shim allocations:\n" << shim_tables_table(shim);
  std::cout << std::flush;
}

int run_inspect(Context& context, const InspectArgs& args) {
  Os& os = context.os();
  std::vector<InspectEntry> previous = take_sample(os, args.name);
  print_sample(os, previous, {}, args);
  if (args.watch_seconds <= 0) return 0;
  const auto interval = std::chrono::duration<double>(args.watch_seconds);
  for (uint64_t sample = 1; args.count == 0 || sample < args.count; ++sample) {
    std::this_thread::sleep_for(interval);
    std::vector<InspectEntry> current = take_sample(os, args.name);
    if (!args.json && isatty(STDOUT_FILENO) == 0) std::cout << "\n";
    print_sample(os, current, rates_between(previous, current), args);
    previous = std::move(current);
  }
  return 0;
}

int run_metrics(Context& context, const std::string& name) {
  Os& os = context.os();
  std::vector<InspectEntry> entries;
  if (name.empty()) {
    entries = inspect_arenas(os);
  } else {
    try {
      entries.push_back({name, inspect_arena(os, name), ""});
    } catch (const Error& error) {
      if (error.errno_value() == ENOENT) throw;  // no such arena
      entries.push_back({name, std::nullopt, error.what()});
    }
  }
  for (const InspectEntry& entry : entries) {
    if (!entry.snapshot) std::cerr << "hugepin: warning: arena " << entry.name << ": " << entry.error << "\n";
  }
  std::cout << metrics_text(entries, os.monotonic_ns());
  return 0;
}

}  // namespace

void add_inspect_commands(CLI::App& app, Context& context) {
  auto inspect_args = std::make_shared<InspectArgs>();
  CLI::App* inspect = app.add_subcommand("inspect", "Show arenas: regions, attached workers, rings, scheduler figures");
  inspect->add_option("NAME", inspect_args->name, "Arena (default: every arena on the machine)")
      ->check(arena_name_validator());
  inspect->add_flag("--json", inspect_args->json, "Print JSON (documented in docs/commands.md)");
  inspect->add_option("--watch", inspect_args->watch_seconds, "Print again every SECONDS, with ring rates")
      ->check(finite_range(0.01, 86400.0));
  inspect->add_option("--count", inspect_args->count, "With --watch: stop after this many samples")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  inspect->callback([&context, inspect_args] {
    context.action = [&context, inspect_args] { return run_inspect(context, *inspect_args); };
  });

  auto metrics_name = std::make_shared<std::string>();
  CLI::App* metrics = app.add_subcommand("metrics", "Print the inspector's figures in Prometheus text format");
  metrics->add_option("NAME", *metrics_name, "Arena (default: every arena on the machine)")
      ->check(arena_name_validator());
  metrics->callback([&context, metrics_name] {
    context.action = [&context, metrics_name] { return run_metrics(context, *metrics_name); };
  });
}

}  // namespace hugepin::cli
