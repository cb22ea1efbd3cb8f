// hugepind's requests: parsed, authorised, answered by one handler each; create and destroy run
// on the job runner and are answered when it reports them done.
#include <exception>

#include "base/error.h"
#include "base/file_status.h"
#include "base/log.h"
#include "base/size.h"
#include "daemon/authorize.h"
#include "daemon/daemon_impl.h"
#include "daemon/quarantine.h"
#include "daemon/reply_json.h"
#include "hugemem/arena.h"
#include "hugemem/naming.h"
#include "ipc/arena_control.h"
#include "ipc/arena_layout.h"
#include "ipc/stale_files.h"

namespace hugepin::daemon::detail {

std::optional<std::string> Daemon::handle(ConnectionId id, const PeerCredentials& peer, std::string_view line) {
  Request request;
  try {
    request = parse_request(line);
  } catch (const ProtocolError& error) {
    ++requests_failed_;
    log_refusal(peer, cat("bad request from pid ", peer.pid, " uid ", peer.uid, ": ", error.what()));
    return reply_line(error_reply(error.what()));
  }
  const bool names_arena = request.op == Operation::kDestroy || request.op == Operation::kResize;
  const std::optional<uid_t> owner = names_arena ? arena_owner(request.name) : std::nullopt;
  const Decision decision = authorize(peer, request.op, request.name, owner, config_.group);
  if (!decision.allowed) {
    ++requests_refused_;
    log_refusal(peer, decision.reason);
    return reply_line(error_reply(decision.reason));
  }
  Json reply;
  bool deferred = false;
  try {
    reply = answer(id, peer, request, &deferred);
  } catch (const std::exception& error) {
    reply = error_reply(error.what());
  }
  if (deferred) return std::nullopt;
  count(reply);
  if (!reply.value("ok", false)) {
    log::warn(cat(operation_name(request.op), " for uid ", peer.uid, " (pid ", peer.pid, ") failed: ",
                  reply.value("error", std::string())));
  }
  return reply_line(reply);
}

void Daemon::refused(const PeerCredentials& peer, std::string_view why) {
  ++requests_refused_;
  log_refusal(peer, cat("refused pid ", peer.pid, " uid ", peer.uid, ": ", why));
}

void Daemon::log_refusal(const PeerCredentials& peer, std::string_view line) {
  if (std::optional<std::string> text = refusals_.note(peer.uid, line, os_.monotonic_ns())) log::warn(*text);
}

Json Daemon::answer(ConnectionId id, const PeerCredentials& peer, const Request& request, bool* deferred) {
  if ((request.op == Operation::kCreate || request.op == Operation::kDestroy) && stopping_) {
    return error_reply("hugepind is stopping: send the request to the next one");
  }
  switch (request.op) {
    case Operation::kCreate: return create(id, peer, request, deferred);
    case Operation::kDestroy: return destroy(id, peer, request, deferred);
    case Operation::kResize: return resize(request);
    case Operation::kList: return list();
    case Operation::kStatus: return status();
  }
  return error_reply("unknown operation");
}

Json Daemon::create(ConnectionId id, const PeerCredentials& peer, const Request& request, bool* deferred) {
  if (std::optional<std::string> refusal = refuse_to_change(request)) return error_reply(*refusal);
  ArenaOptions options = config_.arena;
  options.page_size = request.page_size;
  if (!request.group.empty()) {
    options.group = find_group(request.group);
    if (!options.group) return error_reply(cat("no group named '", request.group, "'"));
    if (peer.uid != 0 && !peer_in_group(peer, *options.group)) {
      return error_reply(cat("uid ", peer.uid, " is not in group '", request.group,
                             "': an arena may be shared only with one of the requester's groups"));
    }
  }
  options.mode = options.group ? 0660 : 0600;
  const ArenaLayout layout = layout_for_size(request.size, request.ranks, request.chunk, request.node.value_or(-1));
  log::info(cat("create arena '", request.name, "' for uid ", peer.uid, " (pid ", peer.pid, "): ",
                format_bytes(request.size), " over ", request.ranks, " ranks, chunks of ", format_bytes(request.chunk)));
  Os* os = &os_;
  defer(id, peer, request, "arena", [os, name = request.name, layout, options] {
    return created_json(create_arena_with_control(*os, name, layout, options), options);
  });
  *deferred = true;
  return {};
}

Json Daemon::destroy(ConnectionId id, const PeerCredentials& peer, const Request& request, bool* deferred) {
  if (std::optional<std::string> refusal = refuse_to_change(request)) return error_reply(*refusal);
  log::info(cat("destroy arena '", request.name, "' for uid ", peer.uid, " (pid ", peer.pid, ")"));
  Os* os = &os_;
  defer(id, peer, request, "destroyed", [os, name = request.name, where = config_.arena] {
    return destroyed_json(name, destroy_arena_with_control(*os, name, where));
  });
  *deferred = true;
  return {};
}

Json Daemon::resize(const Request& request) {
  if (!arena_owner(request.name)) {
    return error_reply(cat("no arena named '", request.name, "' (hugepin daemon list shows them)"));
  }
  return error_reply(cat("arena '", request.name, "' cannot be resized to ", format_bytes(request.size),
                         ": hugetlbfs regions cannot grow in place while workers map them; create a new arena of the "
                         "size needed (and move the data: hugepin arena save, then load)"));
}

Json Daemon::list() {
  const std::set<std::string> changing = busy();
  Json arenas = Json::array();
  for (const ArenaState& state : reaper_.observe(os_.monotonic_ns(), changing)) arenas.push_back(arena_state_json(state));
  Json in_flight = Json::array();
  for (const auto& [tag, flight] : in_flight_) in_flight.push_back({{"arena", flight.arena}, {"op", operation_name(flight.op)}});
  Json stale = Json::array();
  for (const StaleArena& arena : find_stale_arenas(os_, config_.arena, config_.arena_prefix)) {
    if (changing.count(arena.arena) == 0) stale.push_back(stale_json(arena));
  }
  Json quarantined = Json::array();
  for (const QuarantineEntry& entry : list_quarantine(os_, config_.arena_prefix)) quarantined.push_back(quarantine_json(entry));
  Json reply = ok_reply();
  reply["arenas"] = arenas;
  reply["in_flight"] = in_flight;
  reply["stale"] = stale;
  reply["quarantined"] = quarantined;
  return reply;
}

std::optional<std::string> Daemon::refuse_to_change(const Request& request) {
  if (!in_scope(request.name)) {
    return cat("arena '", request.name, "' is outside this hugepind's arenas (HUGEPIN_ARENA_PREFIX='",
               config_.arena_prefix, "')");
  }
  if (busy().count(request.name) != 0) {
    return cat("arena '", request.name, "' is being created or destroyed by another request");
  }
  return std::nullopt;
}

void Daemon::defer(ConnectionId id, const PeerCredentials& peer, const Request& request, std::string key,
                   std::function<Json()> work) {
  const uint64_t tag = next_tag_++;
  in_flight_[tag] = {id, request.name, request.op, peer};
  jobs_->submit(tag, [key = std::move(key), work = std::move(work)]() -> Json {
    try {
      Json reply = ok_reply();
      reply[key] = work();
      return reply;
    } catch (const std::exception& error) {
      return error_reply(error.what());
    }
  });
}

void Daemon::collect_jobs(int64_t now_ns) {
  for (JobRunner::Done& done : jobs_->take_done()) {
    auto it = in_flight_.find(done.tag);
    if (it == in_flight_.end()) continue;
    const InFlight& flight = it->second;
    count(done.reply);
    if (done.reply.value("ok", false)) {
      log::info(cat(operation_name(flight.op), " of arena '", flight.arena, "' for uid ", flight.peer.uid, " (pid ",
                    flight.peer.pid, ") done"));
    } else {
      log::warn(cat(operation_name(flight.op), " of arena '", flight.arena, "' for uid ", flight.peer.uid, " (pid ",
                    flight.peer.pid, ") failed: ", done.reply.value("error", std::string())));
    }
    server_.reply(flight.connection, reply_line(done.reply), now_ns);
    in_flight_.erase(it);
    next_reap_ns_ = 0;  // counts (STATUS=, status, metrics) follow at once, not a reap interval later
  }
  notifier_.status(status_text());
}

void Daemon::count(const Json& reply) {
  if (reply.value("ok", false)) {
    ++requests_ok_;
  } else {
    ++requests_failed_;
  }
}

std::optional<uid_t> Daemon::arena_owner(const std::string& name) {
  std::vector<std::string> candidates{control_segment_path(name)};
  try {
    for (const std::string& root : arena_data_roots(os_, config_.arena)) candidates.push_back(arena_data_dir(root, name));
  } catch (const Error& error) {
    // The segment alone then names the owner; without it the request is refused as unowned.
    log::warn(cat("cannot list arena data roots: ", error.what()));
  }
  for (const std::string& path : candidates) {
    if (std::optional<struct stat> st = stat_no_follow(os_, path)) return st->st_uid;
  }
  return std::nullopt;
}

std::set<std::string> Daemon::busy() const {
  std::set<std::string> names;
  for (const auto& [tag, flight] : in_flight_) names.insert(flight.arena);
  return names;
}

}  // namespace hugepin::daemon::detail
