// hugepind's start, signals, reload and stop (daemon/daemon.h says what each does).
#include <sys/signalfd.h>
#include <unistd.h>

#include <csignal>

#include "base/error.h"
#include "base/log.h"
#include "daemon/adopt.h"
#include "daemon/daemon_impl.h"
#include "daemon/reply_json.h"
#include "ipc/arena_control.h"

namespace hugepin::daemon::detail {
namespace {

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

}  // namespace

Daemon::Daemon(Os& os, FlagValues flags, OptionSource environment, LoadedOptions loaded, DaemonConfig config,
               Notifier notifier)
    : os_(os),
      flags_(std::move(flags)),
      environment_(std::move(environment)),
      loaded_(std::move(loaded)),
      config_(std::move(config)),
      notifier_(std::move(notifier)),
      reaper_(os, getpid()),
      started_realtime_ns_(os.realtime_ns()),
      started_ns_(os.monotonic_ns()) {}

int Daemon::run() {
  start();
  loop();
  finish();
  return 0;
}

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
  adopt_at_start();

  reaper_.set_options(reaper_options_of(config_));
  const int64_t now = os_.monotonic_ns();
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

void Daemon::adopt_at_start() {
  AdoptionReport adoption =
      adopt_arenas(os_, {config_.arena, config_.arena_prefix, config_.stale_grace_ns}, os_.realtime_ns());
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
}

void Daemon::finish() {
  server_.close_all();
  jobs_.reset();
  if (config_.teardown_on_stop) tear_down_arenas();
  write_metrics(false);
  log::info(config_.teardown_on_stop ? "stopped (arenas torn down)" : "stopped (arenas kept for the next hugepind)");
}

void Daemon::tear_down_arenas() {
  for (const ArenaState& state : reaper_.observe(os_.monotonic_ns(), {})) {
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

}  // namespace hugepin::daemon::detail
