// A real hugepind for tests: its own directory under /dev/shm (socket, 4 KiB arenas, metrics,
// log, configuration file), its own arena prefix "t<pid>-<tag>-" (so that it never touches
// another test's or another user's arenas on a shared machine), and a notify listener standing in
// for systemd. Started with fork and exec, waited on for READY=1. HUGEPIN_TEST_HUGEPIND, when
// set, names the hugepind to run instead of this build's (a sanitized build's, for instance).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "daemon/protocol.h"
#include "hugemem/backing.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace hugepin::test {

// A datagram socket where NOTIFY_SOCKET points: a path, or '@' and an abstract name. A thread of
// its own receives every message as it comes, as systemd does: the kernel queues only a few
// datagrams (net.unix.max_dgram_qlen, 10 by default), and a hugepind whose STATUS= lines nobody
// reads waits in sendto and stops serving.
//
// Thread-safety: every method may be called from any thread.
class NotifyListener {
 public:
  explicit NotifyListener(std::string address);
  ~NotifyListener();
  NotifyListener(const NotifyListener&) = delete;
  NotifyListener& operator=(const NotifyListener&) = delete;

  const std::string& address() const { return address_; }
  // True once any message received (before or during the call) contains `needle`; false when
  // `timeout_ms` passes first.
  bool wait_for(std::string_view needle, int timeout_ms);
  // Waits at most `timeout_ms` for one more message than had come when called; true when it came.
  bool receive(int timeout_ms);
  // Every message received so far, in order.
  std::vector<std::string> messages() const;
  // How many messages received so far contain `needle`.
  size_t count(std::string_view needle) const;

 private:
  void read_messages();
  size_t count_locked(std::string_view needle) const;

  std::string address_;
  int fd_ = -1;
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  std::vector<std::string> messages_;
  std::atomic<bool> stopping_{false};
  std::thread reader_;
};

class TestDaemon {
 public:
  // Not started. `abstract_notify`: NOTIFY_SOCKET is an abstract name instead of a path.
  explicit TestDaemon(const std::string& tag, bool abstract_notify = false);
  // Kills a daemon still running, removes its arenas' control segments and quarantine entries.
  ~TestDaemon();
  TestDaemon(const TestDaemon&) = delete;
  TestDaemon& operator=(const TestDaemon&) = delete;

  // An environment variable for the next start (HUGEPIN_* options, WATCHDOG_USEC, ...).
  void set(const std::string& variable, const std::string& value) { env_[variable] = value; }
  void unset(const std::string& variable) { env_.erase(variable); }
  // Writes the configuration file HUGEPIN_CONFIG points at.
  void write_config(const std::string& text);

  // Starts hugepind and waits for READY=1; fails the test (with the daemon's log) otherwise.
  void start(const std::vector<std::string>& args = {});
  // Starts hugepind without waiting.
  void spawn(const std::vector<std::string>& args = {});
  // Sends `signal` and waits; returns the exit status, or -signal when a signal ended it.
  int stop(int signal = SIGTERM);
  // Waits for the daemon to exit; as stop().
  int wait();
  void kill9() { stop(SIGKILL); }
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  // One request over the socket, as this process.
  daemon::Json request(const daemon::Json& request);
  daemon::Json ask(std::string_view op);
  // Asks hugepind to create arena(tag): `bytes` over `ranks` regions of 4 KiB pages, chunks of 64 KiB.
  daemon::Json create(const std::string& tag, uint64_t bytes = 1 << 20, uint32_t ranks = 2);
  // Polls `done` every 20 ms until it holds (true) or `timeout_ms` passes (false).
  static bool wait_until(const std::function<bool()>& done, int timeout_ms = 30000);

  std::string arena(const std::string& tag) const { return prefix_ + tag; }
  const std::string& prefix() const { return prefix_; }
  const std::string& dir() const { return dir_.path(); }
  const std::string& socket() const { return socket_; }
  std::string config_path() const { return dir() + "/hugepind.conf"; }
  std::string log() const;
  // Where this daemon's 4 KiB arenas are (for arenas a test makes itself).
  ArenaOptions where() const;
  NotifyListener& notify() { return notify_; }

 private:
  TempDir dir_;
  std::string prefix_;
  std::string socket_;
  NotifyListener notify_;
  std::map<std::string, std::string> env_;
  pid_t pid_ = 0;
};

}  // namespace hugepin::test
