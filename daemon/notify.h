// The systemd notify protocol (sd_notify(3)), written by hand: one datagram per message to the
// Unix socket named by $NOTIFY_SOCKET (a path, or '@' and an abstract name), each a few
// VARIABLE=value lines. hugepind sends READY=1 once it serves, STATUS= with its arena counts
// when they change, WATCHDOG=1 at half of $WATCHDOG_USEC (when set for this process:
// $WATCHDOG_PID, when present, must be ours), RELOADING=1 and READY=1 around a reload, and
// STOPPING=1 when it starts shutting down.
//
// Without $NOTIFY_SOCKET (not started by systemd) every call does nothing. A message that cannot
// be sent is logged once and otherwise ignored, and none waits for room in a queue the manager
// does not read: the service manager's absence or hang must not stop the daemon.
//
// Thread-safety: one thread at a time.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/options.h"
#include "base/os.h"

namespace hugepin::daemon {

class Notifier {
 public:
  Notifier() = default;
  // Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID from `environment`. `self` is this
  // process's pid. A malformed WATCHDOG_USEC is logged and ignored.
  static Notifier from_environment(Os& os, const OptionSource& environment, pid_t self);

  bool active() const { return !socket_.empty(); }
  const std::string& socket() const { return socket_; }
  // Half of WATCHDOG_USEC, in ns: how often watchdog() must be called; 0 when no watchdog.
  int64_t watchdog_interval_ns() const { return watchdog_interval_ns_; }

  void ready(std::string_view status);
  // Sends STATUS= only when `status` differs from the last one sent.
  void status(std::string_view status);
  void watchdog();
  void reloading();
  void stopping();
  // Sends `message` as is; returns 0 or -errno (0 when inactive).
  int send(std::string_view message);

 private:
  Os* os_ = nullptr;
  std::string socket_;
  int64_t watchdog_interval_ns_ = 0;
  std::string last_status_;
};

}  // namespace hugepin::daemon
