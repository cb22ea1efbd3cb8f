// What hugepind says about itself: the STATUS= line, the figures of its metrics and the status
// reply.
#include <unistd.h>

#include <algorithm>

#include "base/duration.h"
#include "daemon/daemon_impl.h"
#include "daemon/reply_json.h"

namespace hugepin::daemon::detail {
namespace {

size_t owned_arenas(const ReapReport& reap) {
  return static_cast<size_t>(
      std::count_if(reap.arenas.begin(), reap.arenas.end(), [](const ArenaState& s) { return s.owned; }));
}

size_t arenas_in_health(const ReapReport& reap, ArenaHealth health) {
  return static_cast<size_t>(std::count_if(reap.arenas.begin(), reap.arenas.end(),
                                           [health](const ArenaState& s) { return s.check.health == health; }));
}

Json settings_json(const DaemonConfig& config) {
  return {{"arena_prefix", config.arena_prefix},
          {"group", config.group_name},
          {"group_gid", config.group ? Json(*config.group) : Json(nullptr)},
          {"retention", format_duration(config.retention_ns)},
          {"reap_interval", format_duration(config.reap_interval_ns)},
          {"remove_stale", config.remove_stale},
          {"stale_grace", format_duration(config.stale_grace_ns)},
          {"teardown_on_stop", config.teardown_on_stop},
          {"metrics_dir", config.metrics_dir},
          {"max_connections", config.max_connections},
          {"max_connections_per_uid", config.max_connections_per_uid},
          {"reserved_connections", config.reserved_connections}};
}

}  // namespace

std::string Daemon::status_text() const {
  return cat(stopping_ ? "stopping: " : "serving: ", last_reap_.arenas.size(), " arenas (", owned_arenas(last_reap_),
             " owned), ", quarantined_, " quarantined, ", last_reap_.stale.size(), " stale, ", in_flight_.size(),
             " in flight");
}

DaemonFigures Daemon::figures(bool up) const {
  DaemonFigures f;
  f.up = up;
  f.requests_ok = requests_ok_;
  f.requests_failed = requests_failed_;
  f.requests_refused = requests_refused_;
  f.connections = server_.connections();
  f.arenas = last_reap_.arenas.size();
  f.arenas_owned = owned_arenas(last_reap_);
  f.quarantined = quarantined_;
  f.stale = last_reap_.stale.size();
  f.ranks_marked_dead = ranks_marked_dead_;
  f.arenas_expired = arenas_expired_;
  f.stale_removed = stale_removed_;
  f.started_realtime_ns = started_realtime_ns_;
  return f;
}

Json Daemon::status() {
  const DaemonFigures f = figures(true);
  Json reply = ok_reply();
  reply["daemon"] = {{"pid", getpid()},
                     {"version", HUGEPIN_VERSION},
                     {"socket", config_.socket_path},
                     {"config_file", loaded_.file.path},
                     {"config_found", loaded_.file.found},
                     {"started", started_realtime_ns_ / kNanosPerSecond},
                     {"uptime_seconds", seconds(os_.monotonic_ns() - started_ns_)},
                     {"stopping", stopping_},
                     {"watchdog_seconds", seconds(notifier_.watchdog_interval_ns())},
                     {"status", status_text()}};
  reply["arenas"] = {{"managed", f.arenas},
                     {"owned", f.arenas_owned},
                     {"unowned", f.arenas - f.arenas_owned},
                     {"inconsistent", arenas_in_health(last_reap_, ArenaHealth::kInconsistent)},
                     {"inaccessible", arenas_in_health(last_reap_, ArenaHealth::kInaccessible)},
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
  reply["settings"] = settings_json(config_);
  return reply;
}

}  // namespace hugepin::daemon::detail
