// hugepind's event loop: one thread polls the signalfd, the job runner, the socket and its
// connections, and runs the timers (watchdog, reaper, metrics file) when they are due.
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <span>
#include <vector>

#include "base/duration.h"
#include "base/error.h"
#include "base/log.h"
#include "daemon/daemon_impl.h"
#include "daemon/quarantine.h"
#include "ipc/inspect.h"
#include "ipc/metrics.h"

namespace hugepin::daemon::detail {

void Daemon::loop() {
  std::vector<pollfd> fds;
  for (;;) {
    int64_t now = os_.monotonic_ns();
    if (stopping_ && jobs_->pending() == 0 && server_.quiet()) return;
    fds.clear();
    fds.push_back({signals_.get(), POLLIN, 0});
    fds.push_back({jobs_->ready_fd(), POLLIN, 0});
    server_.add_poll_fds(&fds);
    const int64_t wait_ns = std::clamp<int64_t>(next_deadline() - now, 0, 60 * kNanosPerSecond);
    const int wait_ms = static_cast<int>((wait_ns + kNanosPerMilli - 1) / kNanosPerMilli);
    int ready = os_.poll(fds.data(), fds.size(), wait_ms);
    if (ready < 0 && ready != -EINTR) {
      log::warn(cat("poll failed: ", errno_text(-ready)));
      continue;
    }
    now = os_.monotonic_ns();
    if (ready > 0) {
      if (fds[0].revents != 0) on_signals();
      if (fds[1].revents != 0) collect_jobs(now);
    }
    server_.handle_events(std::span<const pollfd>(fds).subspan(2), now, *this);
    run_timers(now);
  }
}

int64_t Daemon::next_deadline() const {
  return std::min({next_watchdog_ns_, server_.next_deadline(), stopping_ ? INT64_MAX : next_reap_ns_,
                   config_.metrics_dir.empty() ? INT64_MAX : next_metrics_ns_});
}

void Daemon::run_timers(int64_t now) {
  if (now >= next_watchdog_ns_) {
    notifier_.watchdog();
    next_watchdog_ns_ = now + notifier_.watchdog_interval_ns();
  }
  if (!stopping_ && now >= next_reap_ns_) {
    reap(now);
    next_reap_ns_ = os_.monotonic_ns() + config_.reap_interval_ns;
  }
  if (!config_.metrics_dir.empty() && now >= next_metrics_ns_) {
    write_metrics(true);
    next_metrics_ns_ = os_.monotonic_ns() + config_.metrics_interval_ns;
  }
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

void Daemon::write_metrics(bool up) {
  if (config_.metrics_dir.empty()) return;
  try {
    std::vector<InspectEntry> entries = inspect_arenas(os_, config_.arena);
    std::erase_if(entries, [&](const InspectEntry& entry) { return !in_scope(entry.name); });
    write_metrics_file(os_, config_.metrics_dir, metrics_text(entries, os_.monotonic_ns()) + daemon_metrics_text(figures(up)));
  } catch (const Error& error) {
    log::warn_once(cat("metrics:", error.what()), cat("metrics file not written: ", error.what()));
  }
}

}  // namespace hugepin::daemon::detail
