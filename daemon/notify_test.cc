// The notify protocol against a test listener: a datagram socket at a path and at an abstract
// name, as systemd's NOTIFY_SOCKET may be either.
#include "daemon/notify.h"

#include <doctest/doctest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "base/error.h"
#include "tests/support/temp_dir.h"

namespace hugepin::daemon {
namespace {

// A datagram socket bound where NOTIFY_SOCKET would point.
class Listener {
 public:
  explicit Listener(const std::string& address) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un target{};
    target.sun_family = AF_UNIX;
    std::memcpy(target.sun_path, address.data(), address.size());
    if (address[0] == '@') target.sun_path[0] = '\0';
    const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size() + (address[0] == '@' ? 0 : 1));
    REQUIRE(bind(fd_, reinterpret_cast<const sockaddr*>(&target), length) == 0);
  }
  ~Listener() { close(fd_); }

  std::optional<std::string> next(int timeout_ms) {
    pollfd entry{fd_, POLLIN, 0};
    if (poll(&entry, 1, timeout_ms) <= 0) return std::nullopt;
    char buffer[4096];
    ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
    if (n < 0) return std::nullopt;
    return std::string(buffer, static_cast<size_t>(n));
  }

 private:
  int fd_ = -1;
};

OptionSource map_source(const std::map<std::string, std::string>& values) {
  return [&values](const char* variable) -> const char* {
    auto it = values.find(variable);
    return it == values.end() ? nullptr : it->second.c_str();
  };
}

void check_messages(Listener& listener, const std::string& address) {
  std::map<std::string, std::string> env{{"NOTIFY_SOCKET", address}, {"WATCHDOG_USEC", "3000000"}};
  Notifier notifier = Notifier::from_environment(real_os(), map_source(env), getpid());
  REQUIRE(notifier.active());
  CHECK(notifier.watchdog_interval_ns() == 1'500'000'000);
  notifier.ready("serving: 2 arenas\nsecond line");
  CHECK(listener.next(5000) == "READY=1\nSTATUS=serving: 2 arenas second line");
  notifier.status("serving: 2 arenas second line");  // unchanged: not sent again
  notifier.status("serving: 3 arenas");
  CHECK(listener.next(5000) == "STATUS=serving: 3 arenas");
  notifier.watchdog();
  CHECK(listener.next(5000) == "WATCHDOG=1");
  notifier.reloading();
  CHECK(listener.next(5000) == "RELOADING=1");
  notifier.stopping();
  CHECK(listener.next(5000) == "STOPPING=1");
  CHECK_FALSE(listener.next(0).has_value());
}

}  // namespace

TEST_CASE("messages reach a listener at a path") {
  test::TempDir dir;
  const std::string address = dir.path() + "/notify";
  Listener listener(address);
  check_messages(listener, address);
}

TEST_CASE("messages reach a listener at an abstract name ('@')") {
  const std::string address = cat("@hugepin-notify-test-", getpid());
  Listener listener(address);
  check_messages(listener, address);
}

TEST_CASE("the watchdog belongs to WATCHDOG_PID when it is set, and bad values mean no watchdog") {
  const std::map<std::string, std::map<std::string, std::string>> cases{
      {"other pid", {{"NOTIFY_SOCKET", "/x"}, {"WATCHDOG_USEC", "1000"}, {"WATCHDOG_PID", "1"}}},
      {"bad pid", {{"NOTIFY_SOCKET", "/x"}, {"WATCHDOG_USEC", "1000"}, {"WATCHDOG_PID", "me"}}},
      {"bad usec", {{"NOTIFY_SOCKET", "/x"}, {"WATCHDOG_USEC", "soon"}}},
      {"zero usec", {{"NOTIFY_SOCKET", "/x"}, {"WATCHDOG_USEC", "0"}}},
      {"no socket", {{"WATCHDOG_USEC", "1000"}}},
  };
  for (const auto& [name, env] : cases) {
    CAPTURE(name);
    CHECK(Notifier::from_environment(real_os(), map_source(env), getpid()).watchdog_interval_ns() == 0);
  }
  std::map<std::string, std::string> mine{{"NOTIFY_SOCKET", "/x"}, {"WATCHDOG_USEC", "1000"},
                                          {"WATCHDOG_PID", std::to_string(getpid())}};
  CHECK(Notifier::from_environment(real_os(), map_source(mine), getpid()).watchdog_interval_ns() == 500'000);
}

TEST_CASE("without NOTIFY_SOCKET nothing is sent; an unreachable socket is an error code, not a failure") {
  std::map<std::string, std::string> none;
  Notifier quiet = Notifier::from_environment(real_os(), map_source(none), getpid());
  CHECK_FALSE(quiet.active());
  CHECK(quiet.send("READY=1") == 0);
  std::map<std::string, std::string> gone{{"NOTIFY_SOCKET", "/nonexistent/notify"}};
  Notifier unreachable = Notifier::from_environment(real_os(), map_source(gone), getpid());
  CHECK(unreachable.send("READY=1") == -ENOENT);
  unreachable.ready("still running");  // logged once, never thrown
}

TEST_CASE("a service manager that stops reading never holds the daemon up") {
  // A datagram socket queues net.unix.max_dgram_qlen messages (10 by default) or its receive
  // buffer's worth; a send past that would wait for the manager to read, which a hung one never
  // does. Far more than either are sent to a listener that reads nothing.
  test::TempDir dir;
  const std::string address = dir.path() + "/notify";
  Listener listener(address);
  std::map<std::string, std::string> env{{"NOTIFY_SOCKET", address}};
  Notifier notifier = Notifier::from_environment(real_os(), map_source(env), getpid());
  REQUIRE(notifier.active());
  std::atomic<bool> done{false};
  int refused = 0;
  std::thread sender([&] {
    for (int i = 0; i < 4096; ++i) {
      if (notifier.send("WATCHDOG=1") == -EAGAIN) ++refused;
    }
    done = true;
  });
  for (int i = 0; i < 200 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const bool finished_unread = done;
  while (!done) listener.next(100);  // a sender that waits for room is let go, to fail below
  sender.join();
  CHECK(finished_unread);
  CHECK(refused > 0);
}

}  // namespace hugepin::daemon
