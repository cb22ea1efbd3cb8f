// hugepind's state and the members that act on it, one concern per file (internal to
// daemon/daemon.cc's run_daemon; daemon/daemon.h is the contract):
//   daemon_lifecycle.cc   start, signals, reload, stop and teardown
//   daemon_loop.cc        the event loop and its timers (watchdog, reaper, metrics)
//   daemon_requests.cc    one handler per request, and the replies of deferred ones
//   daemon_status.cc      what hugepind says about itself: STATUS=, the status reply, metrics
// The JSON of arenas in replies is in daemon/reply_json.h.
//
// Thread-safety: none; the event loop's thread owns it (create and destroy run on the job
// runner's thread with copies of what they need, never the Daemon).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "base/options.h"
#include "base/os.h"
#include "base/unique_fd.h"
#include "daemon/config.h"
#include "daemon/jobs.h"
#include "daemon/metrics_file.h"
#include "daemon/notify.h"
#include "daemon/protocol.h"
#include "daemon/reaper.h"
#include "daemon/refusal_log.h"
#include "daemon/server.h"

#ifndef HUGEPIN_VERSION
#define HUGEPIN_VERSION "unknown"
#endif

namespace hugepin::daemon::detail {

// A create or destroy running on the job runner: whose it is and where its reply goes.
struct InFlight {
  ConnectionId connection = 0;
  std::string arena;
  Operation op = Operation::kCreate;
  PeerCredentials peer;
};

class Daemon final : public RequestHandler {
 public:
  Daemon(Os& os, FlagValues flags, OptionSource environment, LoadedOptions loaded, DaemonConfig config,
         Notifier notifier);

  // Starts, serves until SIGTERM or SIGINT, stops; returns 0. Throws Error when it cannot start.
  int run();

  std::optional<std::string> handle(ConnectionId id, const PeerCredentials& peer, std::string_view line) override;
  void refused(const PeerCredentials& peer, std::string_view why) override;

 private:
  // daemon_lifecycle.cc
  void start();
  void adopt_at_start();
  void finish();
  void tear_down_arenas();
  void begin_stop(std::string_view why);
  void on_signals();
  void reload();

  // daemon_loop.cc
  void loop();
  int64_t next_deadline() const;
  void run_timers(int64_t now);
  void reap(int64_t now_ns);
  void write_metrics(bool up);

  // daemon_requests.cc
  Json answer(ConnectionId id, const PeerCredentials& peer, const Request& request, bool* deferred);
  Json create(ConnectionId id, const PeerCredentials& peer, const Request& request, bool* deferred);
  Json destroy(ConnectionId id, const PeerCredentials& peer, const Request& request, bool* deferred);
  Json resize(const Request& request);
  Json list();
  // Why `request` may not create or destroy its arena now (out of scope, busy); nullopt: it may.
  std::optional<std::string> refuse_to_change(const Request& request);
  // Runs `work` on the job runner for `request`, answered when it is done (collect_jobs): its
  // JSON under `key` in an ok reply, or what it threw in an error reply. `work` runs on another
  // thread: it captures what it needs by value, never the Daemon.
  void defer(ConnectionId id, const PeerCredentials& peer, const Request& request, std::string key,
             std::function<Json()> work);
  void collect_jobs(int64_t now_ns);
  void count(const Json& reply);
  // A client's refusals and bad requests, at most one line per uid per 10 s (daemon/refusal_log.h).
  void log_refusal(const PeerCredentials& peer, std::string_view line);
  std::optional<uid_t> arena_owner(const std::string& name);
  bool in_scope(const std::string& name) const {
    return name.compare(0, config_.arena_prefix.size(), config_.arena_prefix) == 0;
  }
  std::set<std::string> busy() const;

  // daemon_status.cc
  Json status();
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
  int64_t started_realtime_ns_;
  int64_t started_ns_;
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

}  // namespace hugepin::daemon::detail
