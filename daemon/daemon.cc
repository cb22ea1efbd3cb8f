#include "daemon/daemon.h"

#include <fcntl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <span>

#include "base/duration.h"
#include "base/error.h"
#include "base/file_status.h"
#include "base/log.h"
#include "base/size.h"
#include "daemon/adopt.h"
#include "daemon/authorize.h"
#include "daemon/jobs.h"
#include "daemon/metrics_file.h"
#include "daemon/notify.h"
#include "daemon/protocol.h"
#include "daemon/quarantine.h"
#include "daemon/refusal_log.h"
#include "daemon/reaper.h"
#include "daemon/server.h"
#include "hugemem/arena.h"
#include "hugemem/naming.h"
#include "ipc/arena_control.h"
#include "ipc/arena_layout.h"
#include "ipc/inspect.h"
#include "ipc/metrics.h"
#include "ipc/stale_files.h"

#ifndef HUGEPIN_VERSION
#define HUGEPIN_VERSION "unknown"
#endif

namespace hugepin::daemon {
namespace {

int64_t clock_ns(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}
int64_t monotonic_now() { return clock_ns(CLOCK_MONOTONIC); }
int64_t realtime_now() { return clock_ns(CLOCK_REALTIME); }

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode));
  return text;
}

double seconds(int64_t nanos) { return static_cast<double>(nanos) / 1e9; }

ServerLimits limits_of(const DaemonConfig& config) {
  ServerLimits limits;
  limits.max_connections = static_cast<size_t>(config.max_connections);
  limits.idle_timeout_ns = config.request_timeout_ns;
  limits.max_request_bytes = config.max_request_bytes;
  limits.max_connections_per_uid = static_cast<size_t>(config.max_connections_per_uid);
  limits.reserved_connections = static_cast<size_t>(config.reserved_connections);
  limits.privileged_group = config.group;
  return limits;
}

ReaperOptions reaper_options_of(const DaemonConfig& config) {
  return {config.arena, config.arena_prefix, config.retention_ns, config.remove_stale, config.stale_grace_ns};
}

Json created_json(const ArenaCreated& created, const ArenaOptions& options) {
  Json regions = Json::array();
  for (const RegionReport& region : created.data.regions) {
    regions.push_back({{"rank", region.rank},
                       {"path", region.path},
                       {"bytes", region.bytes},
                       {"page_size", region.placement.page_size},
                       {"node_requested", region.node_requested},
                       {"node", region.placement.majority_node()},
                       {"fallback", region.fallback}});
  }
  return {{"name", created.data.name},
          {"segment", created.segment_path},
          {"segment_bytes", created.segment_bytes},
          {"ring_capacity", created.ring_capacity},
          {"group_gid", options.group ? Json(*options.group) : Json(nullptr)},
          {"mode", mode_text(options.group ? 0660 : options.mode)},
          {"regions", regions}};
}

Json arena_state_json(const ArenaState& state) {
  const ArenaCheck& check = state.check;
  Json json{{"name", check.name},
            {"health", health_name(check.health)},
            {"owner_uid", check.owner_uid},
            {"group_gid", check.group_gid},
            {"mode", mode_text(check.mode)},
            {"generation", state.generation},
            {"ranks", state.ranks},
            {"bytes", check.bytes},
            {"live_workers", state.live_workers},
            {"dead_ranks", state.dead_ranks},
            {"locked_regions", state.locked_regions},
            {"scheduler_alive", state.scheduler_alive},
            {"creator_alive", state.creator_alive},
            {"owned", state.owned},
            {"unowned_seconds", seconds(state.unowned_ns)}};
  if (!check.reason.empty()) json["reason"] = check.reason;
  return json;
}

Json stale_json(const StaleArena& stale) {
  return {{"arena", stale.arena},         {"kind", stale_kind_name(stale.kind)}, {"paths", stale.paths},
          {"region_files", stale.region_files}, {"bytes", stale.bytes},     {"owner_uid", stale.owner},
          {"age_seconds", seconds(stale.age_ns)}, {"in_use", stale.in_use}};
}

Json quarantine_json(const QuarantineEntry& entry) {
  return {{"arena", entry.arena}, {"entry", entry.name}, {"path", entry.path}, {"reason", entry.reason},
          {"moved", entry.moved}};
}

struct InFlight {
  ConnectionId connection = 0;
  std::string arena;
  Operation op = Operation::kCreate;
  PeerCredentials peer;
};

class Daemon final : public RequestHandler {
 public:
  Daemon(Os& os, FlagValues flags, OptionSource environment, LoadedOptions loaded, DaemonConfig config, Notifier notifier)
      : os_(os),
        flags_(std::move(flags)),
        environment_(std::move(environment)),
        loaded_(std::move(loaded)),
        config_(std::move(config)),
        notifier_(std::move(notifier)),
        reaper_(os, getpid()) {}

  int run() {
    start();
    loop();
    finish();
    return 0;
  }

  std::optional<std::string> handle(ConnectionId id, const PeerCredentials& peer, std::string_view line) override;
  void refused(const PeerCredentials& peer, std::string_view why) override {
    ++requests_refused_;
    log_refusal(peer, cat("refused pid ", peer.pid, " uid ", peer.uid, ": ", why));
  }

 private:
  // A client's refusals and bad requests, at most one line per uid per 10 s (daemon/refusal_log.h).
  void log_refusal(const PeerCredentials& peer, std::string_view line) {
    if (std::optional<std::string> text = refusals_.note(peer.uid, line, monotonic_now())) log::warn(*text);
  }

  void start();
  void loop();
  void finish();
  void begin_stop(std::string_view why);
  void on_signals();
  void reload();
  void reap(int64_t now_ns);
  void write_metrics(bool up);
  void collect_jobs(int64_t now_ns);
  void count(const Json& reply);

  Json answer(ConnectionId id, const PeerCredentials& peer, const Request& request, bool* deferred);
  Json create(ConnectionId id, const PeerCredentials& peer, const Request& request, bool* deferred);
  Json destroy(ConnectionId id, const PeerCredentials& peer, const Request& request, bool* deferred);
  Json resize(const Request& request);
  Json list();
  Json status();

  std::optional<uid_t> arena_owner(const std::string& name);
  bool in_scope(const std::string& name) const { return name.compare(0, config_.arena_prefix.size(), config_.arena_prefix) == 0; }
  std::set<std::string> busy() const;
  std::string status_text() const;
  DaemonFigures figures(bool up) const;

  Os& os_;
  const FlagValues flags_;
  const OptionSource environment_;
  LoadedOptions loaded_;
  DaemonConfig config_;
  Notifier notifier_;
  RequestServer server_;
  std::unique_ptr<JobRunner> jobs_;
  Reaper reaper_;
  UniqueFd signals_;

  std::map<uint64_t, InFlight> in_flight_;
  uint64_t next_tag_ = 1;
  bool ready_ = false;
  bool stopping_ = false;
  int64_t started_realtime_ns_ = realtime_now();
  int64_t started_ns_ = monotonic_now();
  int64_t next_watchdog_ns_ = INT64_MAX;
  int64_t next_reap_ns_ = 0;
  int64_t next_metrics_ns_ = 0;

  ReapReport last_reap_;
  size_t quarantined_ = 0;
  size_t adopted_at_start_ = 0;
  size_t quarantined_at_start_ = 0;
  uint64_t reaper_passes_ = 0;
  uint64_t requests_ok_ = 0;
  uint64_t requests_failed_ = 0;
  uint64_t requests_refused_ = 0;
  RefusalLog refusals_;
  uint64_t ranks_marked_dead_ = 0;
  uint64_t arenas_expired_ = 0;
  uint64_t stale_removed_ = 0;
};

void Daemon::start() {
  log::info(cat("hugepind ", HUGEPIN_VERSION, " starting, pid ", getpid(), "; configuration file ", loaded_.file.path,
                loaded_.file.found ? "" : " (not found: defaults)"));
  for (const std::string& line : effective_lines(loaded_)) log::info(cat("option ", line));

  sigset_t signals;
  sigemptyset(&signals);
  for (int signal : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&signals, signal);
  int fd = os_.signal_fd(signals);
  if (fd < 0) throw_errno("cannot create a signalfd", -fd);
  signals_ = UniqueFd(os_, fd);
  jobs_ = std::make_unique<JobRunner>(os_, signals);  // after the mask: its thread inherits it

  server_ = RequestServer::listen(os_, config_.socket_path, config_.socket_mode, config_.group, limits_of(config_));
  log::info(cat("listening on ", config_.socket_path, " (mode ", mode_text(config_.socket_mode), ", group ",
                config_.group ? std::to_string(*config_.group) : std::string("none"), ")"));

  AdoptionReport adoption =
      adopt_arenas(os_, {config_.arena, config_.arena_prefix, config_.stale_grace_ns}, realtime_now());
  for (const AdoptedArena& arena : adoption.adopted) {
    log::info(cat("adopted arena '", arena.name, "': generation ", arena.generation));
  }
  for (const QuarantineEntry& entry : adoption.quarantined) {
    log::warn(cat("quarantined arena '", entry.arena, "' into ", entry.path, ": ", entry.reason));
  }
  for (const ArenaCheck& check : adoption.left_alone) {
    log::warn(cat("left arena '", check.name, "' alone (", health_name(check.health), "): ", check.reason));
  }
  adopted_at_start_ = adoption.adopted.size();
  quarantined_at_start_ = adoption.quarantined.size();

  reaper_.set_options(reaper_options_of(config_));
  const int64_t now = monotonic_now();
  reap(now);
  next_reap_ns_ = now + config_.reap_interval_ns;
  write_metrics(true);
  next_metrics_ns_ = now + config_.metrics_interval_ns;
  notifier_.ready(status_text());
  ready_ = true;
  if (notifier_.watchdog_interval_ns() > 0) {
    notifier_.watchdog();
    next_watchdog_ns_ = now + notifier_.watchdog_interval_ns();
  }
  log::info(cat("ready: ", status_text()));
}

void Daemon::loop() {
  std::vector<pollfd> fds;
  for (;;) {
    int64_t now = monotonic_now();
    if (stopping_ && jobs_->pending() == 0 && server_.quiet()) return;
    fds.clear();
    fds.push_back({signals_.get(), POLLIN, 0});
    fds.push_back({jobs_->ready_fd(), POLLIN, 0});
    server_.add_poll_fds(&fds);
    int64_t deadline = std::min({next_watchdog_ns_, server_.next_deadline(),
                                 stopping_ ? INT64_MAX : next_reap_ns_,
                                 config_.metrics_dir.empty() ? INT64_MAX : next_metrics_ns_});
    const int64_t wait_ns = std::clamp<int64_t>(deadline - now, 0, 60 * kNanosPerSecond);
    const int wait_ms = static_cast<int>((wait_ns + kNanosPerMilli - 1) / kNanosPerMilli);
    int ready = os_.poll(fds.data(), fds.size(), wait_ms);
    if (ready < 0 && ready != -EINTR) {
      log::warn(cat("poll failed: ", errno_text(-ready)));
      continue;
    }
    now = monotonic_now();
    if (ready > 0) {
      if (fds[0].revents != 0) on_signals();
      if (fds[1].revents != 0) collect_jobs(now);
    }
    server_.handle_events(std::span<const pollfd>(fds).subspan(2), now, *this);
    if (now >= next_watchdog_ns_) {
      notifier_.watchdog();
      next_watchdog_ns_ = now + notifier_.watchdog_interval_ns();
    }
    if (!stopping_ && now >= next_reap_ns_) {
      reap(now);
      next_reap_ns_ = monotonic_now() + config_.reap_interval_ns;
    }
    if (!config_.metrics_dir.empty() && now >= next_metrics_ns_) {
      write_metrics(true);
      next_metrics_ns_ = monotonic_now() + config_.metrics_interval_ns;
    }
  }
}

void Daemon::finish() {
  server_.close_all();
  jobs_.reset();
  if (config_.teardown_on_stop) {
    for (const ArenaState& state : reaper_.observe(monotonic_now(), {})) {
      if (state.check.health != ArenaHealth::kConsistent) {
        log::warn(cat("teardown: left arena '", state.check.name, "' (", health_name(state.check.health), "): ",
                      state.check.reason));
        continue;
      }
      try {
        ArenaDestroyed destroyed = destroy_arena_with_control(os_, state.check.name, config_.arena);
        log::info(cat("teardown: destroyed arena '", state.check.name, "' (", destroyed.region_files, " region files)"));
      } catch (const Error& error) {
        log::warn(cat("teardown: cannot destroy arena '", state.check.name, "': ", error.what()));
      }
    }
  }
  write_metrics(false);
  log::info(config_.teardown_on_stop ? "stopped (arenas torn down)" : "stopped (arenas kept for the next hugepind)");
}

void Daemon::begin_stop(std::string_view why) {
  if (stopping_) return;
  stopping_ = true;
  notifier_.stopping();
  server_.stop_listening();
  log::info(cat("stopping on ", why, ": no new connections; ", in_flight_.size(), " requests in flight finish first"));
}

void Daemon::on_signals() {
  signalfd_siginfo info{};
  while (os_.read(signals_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    switch (info.ssi_signo) {
      case SIGTERM: begin_stop("SIGTERM"); break;
      case SIGINT: begin_stop("SIGINT"); break;
      case SIGHUP: reload(); break;
      default: break;
    }
  }
}

void Daemon::reload() {
  notifier_.reloading();
  try {
    LoadedOptions loaded = load_options(os_, flags_, environment_);
    std::vector<std::string> warnings;
    DaemonConfig config = resolve_config(loaded, environment_("RUNTIME_DIRECTORY"), &warnings);
    for (const std::string& warning : warnings) log::warn(warning);
    if (config.socket_path != config_.socket_path || config.socket_mode != config_.socket_mode) {
      log::warn("reload: socket and socket_mode take effect at the next start");
      config.socket_path = config_.socket_path;
      config.socket_mode = config_.socket_mode;
    }
    const std::vector<std::string> before = effective_lines(loaded_);
    const std::vector<std::string> after = effective_lines(loaded);
    for (size_t i = 0; i < after.size(); ++i) {
      if (i >= before.size() || before[i] != after[i]) log::info(cat("reload: option ", after[i]));
    }
    loaded_ = std::move(loaded);
    config_ = std::move(config);
    log::set_level(config_.log_level);
    server_.set_limits(limits_of(config_));
    reaper_.set_options(reaper_options_of(config_));
    next_reap_ns_ = 0;  // a pass now, under the new options
    log::info(cat("reloaded ", loaded_.file.path));
  } catch (const Error& error) {
    log::warn(cat("reload failed, keeping the running configuration: ", error.what()));
  }
  notifier_.ready(status_text());
}

void Daemon::reap(int64_t now_ns) {
  try {
    last_reap_ = reaper_.pass(now_ns, busy());
  } catch (const Error& error) {
    // /proc/mounts unreadable for want of descriptors, a directory that vanished mid-scan...:
    // the next pass tries again; the daemon keeps serving.
    log::warn(cat("reaper pass failed (next one in ", config_.reap_interval_ns / 1'000'000'000, " s): ", error.what()));
    return;
  }
  ++reaper_passes_;
  for (const std::string& event : last_reap_.events) log::info(event);
  ranks_marked_dead_ += last_reap_.marked_dead;
  arenas_expired_ += last_reap_.expired;
  stale_removed_ += last_reap_.stale_removed;
  quarantined_ = list_quarantine(os_, config_.arena_prefix).size();
  if (ready_) notifier_.status(status_text());  // READY=1 carries the first STATUS
}

DaemonFigures Daemon::figures(bool up) const {
  DaemonFigures f;
  f.up = up;
  f.requests_ok = requests_ok_;
  f.requests_failed = requests_failed_;
  f.requests_refused = requests_refused_;
  f.connections = server_.connections();
  f.arenas = last_reap_.arenas.size();
  f.arenas_owned = static_cast<uint64_t>(
      std::count_if(last_reap_.arenas.begin(), last_reap_.arenas.end(), [](const ArenaState& s) { return s.owned; }));
  f.quarantined = quarantined_;
  f.stale = last_reap_.stale.size();
  f.ranks_marked_dead = ranks_marked_dead_;
  f.arenas_expired = arenas_expired_;
  f.stale_removed = stale_removed_;
  f.started_realtime_ns = started_realtime_ns_;
  return f;
}

void Daemon::write_metrics(bool up) {
  if (config_.metrics_dir.empty()) return;
  try {
    std::vector<InspectEntry> entries = inspect_arenas(os_, config_.arena);
    std::erase_if(entries, [&](const InspectEntry& entry) { return !in_scope(entry.name); });
    write_metrics_file(os_, config_.metrics_dir, metrics_text(entries, monotonic_now()) + daemon_metrics_text(figures(up)));
  } catch (const Error& error) {
    log::warn_once(cat("metrics:", error.what()), cat("metrics file not written: ", error.what()));
  }
}

std::string Daemon::status_text() const {
  const size_t owned = static_cast<size_t>(
      std::count_if(last_reap_.arenas.begin(), last_reap_.arenas.end(), [](const ArenaState& s) { return s.owned; }));
  return cat(stopping_ ? "stopping: " : "serving: ", last_reap_.arenas.size(), " arenas (", owned, " owned), ",
             quarantined_, " quarantined, ", last_reap_.stale.size(), " stale, ", in_flight_.size(), " in flight");
}

std::set<std::string> Daemon::busy() const {
  std::set<std::string> names;
  for (const auto& [tag, flight] : in_flight_) names.insert(flight.arena);
  return names;
}

void Daemon::count(const Json& reply) {
  if (reply.value("ok", false)) {
    ++requests_ok_;
  } else {
    ++requests_failed_;
  }
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
  if (!in_scope(request.name)) {
    return error_reply(cat("arena '", request.name, "' is outside this hugepind's arenas (HUGEPIN_ARENA_PREFIX='",
                           config_.arena_prefix, "')"));
  }
  if (busy().count(request.name) != 0) {
    return error_reply(cat("arena '", request.name, "' is being created or destroyed by another request"));
  }
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
  const uint64_t tag = next_tag_++;
  in_flight_[tag] = {id, request.name, request.op, peer};
  Os* os = &os_;
  jobs_->submit(tag, [os, name = request.name, layout, options]() -> Json {
    try {
      ArenaCreated created = create_arena_with_control(*os, name, layout, options);
      Json reply = ok_reply();
      reply["arena"] = created_json(created, options);
      return reply;
    } catch (const std::exception& error) {
      return error_reply(error.what());
    }
  });
  *deferred = true;
  return {};
}

Json Daemon::destroy(ConnectionId id, const PeerCredentials& peer, const Request& request, bool* deferred) {
  if (!in_scope(request.name)) {
    return error_reply(cat("arena '", request.name, "' is outside this hugepind's arenas (HUGEPIN_ARENA_PREFIX='",
                           config_.arena_prefix, "')"));
  }
  if (busy().count(request.name) != 0) {
    return error_reply(cat("arena '", request.name, "' is being created or destroyed by another request"));
  }
  log::info(cat("destroy arena '", request.name, "' for uid ", peer.uid, " (pid ", peer.pid, ")"));
  const uint64_t tag = next_tag_++;
  in_flight_[tag] = {id, request.name, request.op, peer};
  Os* os = &os_;
  jobs_->submit(tag, [os, name = request.name, where = config_.arena]() -> Json {
    try {
      ArenaDestroyed destroyed = destroy_arena_with_control(*os, name, where);
      Json reply = ok_reply();
      reply["destroyed"] = {{"name", name},
                            {"control_removed", destroyed.control_removed},
                            {"region_files", destroyed.region_files}};
      return reply;
    } catch (const std::exception& error) {
      return error_reply(error.what());
    }
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
  for (const ArenaState& state : reaper_.observe(monotonic_now(), changing)) arenas.push_back(arena_state_json(state));
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

Json Daemon::status() {
  const DaemonFigures f = figures(true);
  size_t inconsistent = 0;
  size_t inaccessible = 0;
  for (const ArenaState& state : last_reap_.arenas) {
    if (state.check.health == ArenaHealth::kInconsistent) ++inconsistent;
    if (state.check.health == ArenaHealth::kInaccessible) ++inaccessible;
  }
  Json reply = ok_reply();
  reply["daemon"] = {{"pid", getpid()},
                     {"version", HUGEPIN_VERSION},
                     {"socket", config_.socket_path},
                     {"config_file", loaded_.file.path},
                     {"config_found", loaded_.file.found},
                     {"started", started_realtime_ns_ / kNanosPerSecond},
                     {"uptime_seconds", seconds(monotonic_now() - started_ns_)},
                     {"stopping", stopping_},
                     {"watchdog_seconds", seconds(notifier_.watchdog_interval_ns())},
                     {"status", status_text()}};
  reply["arenas"] = {{"managed", f.arenas},
                     {"owned", f.arenas_owned},
                     {"unowned", f.arenas - f.arenas_owned},
                     {"inconsistent", inconsistent},
                     {"inaccessible", inaccessible},
                     {"in_flight", in_flight_.size()},
                     {"adopted_at_start", adopted_at_start_},
                     {"quarantined_at_start", quarantined_at_start_}};
  reply["quarantined"] = quarantined_;
  reply["stale"] = last_reap_.stale.size();
  reply["requests"] = {{"ok", requests_ok_}, {"error", requests_failed_}, {"refused", requests_refused_}};
  reply["connections"] = server_.connections();
  reply["reaper"] = {{"passes", reaper_passes_},
                     {"ranks_marked_dead", ranks_marked_dead_},
                     {"arenas_expired", arenas_expired_},
                     {"stale_removed", stale_removed_}};
  reply["settings"] = {{"arena_prefix", config_.arena_prefix},
                       {"group", config_.group_name},
                       {"group_gid", config_.group ? Json(*config_.group) : Json(nullptr)},
                       {"retention", format_duration(config_.retention_ns)},
                       {"reap_interval", format_duration(config_.reap_interval_ns)},
                       {"remove_stale", config_.remove_stale},
                       {"stale_grace", format_duration(config_.stale_grace_ns)},
                       {"teardown_on_stop", config_.teardown_on_stop},
                       {"metrics_dir", config_.metrics_dir},
                       {"max_connections", config_.max_connections},
                       {"max_connections_per_uid", config_.max_connections_per_uid},
                       {"reserved_connections", config_.reserved_connections}};
  return reply;
}

}  // namespace

int run_daemon(Os& os, const FlagValues& flags, const OptionSource& environment) {
  log::set_program("hugepind");
  Notifier notifier = Notifier::from_environment(os, environment, getpid());
  LoadedOptions loaded;
  DaemonConfig config;
  try {
    loaded = load_options(os, flags, environment);
    std::vector<std::string> warnings;
    config = resolve_config(loaded, environment("RUNTIME_DIRECTORY"), &warnings);
    log::set_level(config.log_level);
    for (const std::string& warning : warnings) log::warn(warning);
  } catch (const Error& error) {
    std::cerr << "hugepind: error: " << error.what() << "\n";
    notifier.send(cat("STATUS=bad configuration: ", error.what()));
    return 2;
  }
  try {
    Daemon daemon(os, flags, environment, std::move(loaded), std::move(config), std::move(notifier));
    return daemon.run();
  } catch (const std::exception& error) {
    std::cerr << "hugepind: error: " << error.what() << "\n";
    return 1;
  }
}

}  // namespace hugepin::daemon
