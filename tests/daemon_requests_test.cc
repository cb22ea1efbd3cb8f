// hugepind as a process, over its socket: the notify protocol, requests from allowed and refused
// users (clients run as uid 65534), garbage, oversized and unknown requests, a flood of
// connections.
#include <doctest/doctest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/pattern.h"
#include "daemon/client.h"
#include "daemon/protocol.h"
#include "ipc/arena_control.h"
#include "ipc/rank_attachment.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/file_text.h"

namespace hugepin {
namespace {

using daemon::Json;

int raw_connect(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  REQUIRE(connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
  return fd;
}

// Reads until a newline or the end of the stream (at most `timeout_ms`); `closed` says which.
std::string read_line(int fd, int timeout_ms, bool* closed = nullptr) {
  std::string text;
  if (closed != nullptr) *closed = false;
  while (text.find('\n') == std::string::npos) {
    pollfd entry{fd, POLLIN, 0};
    if (poll(&entry, 1, timeout_ms) <= 0) break;
    char buffer[4096];
    ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) {
      if (closed != nullptr) *closed = true;
      break;
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

// True when the connection reaches its end within `timeout_ms` (after any lines still to come).
bool closes(int fd, int timeout_ms) {
  for (;;) {
    bool closed = false;
    read_line(fd, timeout_ms, &closed);
    if (closed) return true;
    pollfd entry{fd, POLLIN, 0};
    if (poll(&entry, 1, timeout_ms) <= 0) return false;
  }
}

Json parse_reply(const std::string& line) {
  Json reply = Json::parse(line, nullptr, false);
  REQUIRE_MESSAGE(reply.is_object(), "not a JSON object: ", line);
  return reply;
}

// Sends `request` from a client that is uid 65534 with groups (gid, groups); true when the reply
// has ok == `expect_ok` and, when refused, the error says so.
bool nobody_asks(test::TestDaemon& d, gid_t gid, const std::vector<gid_t>& groups, const Json& request, bool expect_ok) {
  return test::run_as_nobody(gid, groups, [&] {
           Json reply = daemon::DaemonClient::connect(real_os(), d.socket()).request(request, 60'000'000'000);
           if (reply.value("ok", false) != expect_ok) {
             std::fprintf(stderr, "unexpected reply: %s\n", reply.dump().c_str());
             return false;
           }
           return expect_ok || reply.value("error", std::string()).find("refused for uid 65534") != std::string::npos;
         }) == 0;
}

}  // namespace

TEST_CASE("notify: READY with the arena counts, STATUS as they change, STOPPING at SIGTERM; arenas outlive the daemon") {
  test::TestDaemon d("notify");
  d.start();
  REQUIRE_FALSE(d.notify().messages().empty());
  CHECK(d.notify().messages()[0].find("READY=1\nSTATUS=serving: 0 arenas (0 owned)") == 0);

  Json status = d.ask("status");
  CHECK(status["ok"] == true);
  CHECK(status["daemon"]["pid"] == d.pid());
  CHECK(status["daemon"]["socket"] == d.socket());

  REQUIRE(d.create("a")["ok"] == true);
  CHECK(d.notify().wait_for("STATUS=serving: 1 arenas", 30000));

  CHECK(d.stop(SIGTERM) == 0);
  CHECK(d.notify().wait_for("STOPPING=1", 30000));
  size_t ready = 0, stopping = 0;
  for (size_t i = 0; i < d.notify().messages().size(); ++i) {
    if (d.notify().messages()[i].find("READY=1") != std::string::npos && ready == 0) ready = i + 1;
    if (d.notify().messages()[i] == "STOPPING=1") stopping = i + 1;
  }
  CHECK(ready == 1);
  CHECK(stopping > ready);
  CHECK(access(d.socket().c_str(), F_OK) != 0);                               // its socket is gone
  CHECK(access(control_segment_path(d.arena("a")).c_str(), F_OK) == 0);      // its arena is not
  const std::string metrics = test::file_text(d.dir() + "/hugepin.prom");
  CHECK(metrics.find("hugepind_up 0\n") != std::string::npos);
  CHECK(metrics.find(cat("hugepin_arena_up{arena=\"", d.arena("a"), "\"} 1")) != std::string::npos);
  CHECK(d.log().find("stopped (arenas kept for the next hugepind)") != std::string::npos);
}

TEST_CASE("notify at an abstract socket, with WATCHDOG=1 pings at half of WATCHDOG_USEC") {
  test::TestDaemon d("watchdog", /*abstract_notify=*/true);
  d.set("WATCHDOG_USEC", "200000");
  d.start();
  CHECK(d.notify().messages()[0].find("READY=1") == 0);
  CHECK(test::TestDaemon::wait_until([&] {
    d.notify().receive(50);
    return d.notify().count("WATCHDOG=1") >= 3;
  }));
  Json status = d.ask("status");
  CHECK(status["daemon"]["watchdog_seconds"] == 0.1);
  CHECK(d.stop() == 0);
}

TEST_CASE("root and group members are served; everyone else is refused and the refusal logged") {
  test::TestDaemon d("users");
  d.set("HUGEPIN_GROUP", "nogroup");  // gid 65534
  d.set("HUGEPIN_SOCKET_MODE", "0666");  // let the daemon, not the file mode, refuse
  REQUIRE(mkdir((d.dir() + "/hugepin").c_str(), 01777) == 0);  // as tmpfiles.d makes /dev/shm/hugepin
  REQUIRE(chmod((d.dir() + "/hugepin").c_str(), 01777) == 0);
  d.start();
  CHECK(d.ask("list")["ok"] == true);

  const gid_t nogroup = 65534;
  const gid_t users = 100;
  const Json status{{"version", 1}, {"op", "status"}};
  const Json create{{"version", 1}, {"op", "create"},   {"name", d.arena("shared")}, {"size", 1 << 20},
                    {"ranks", 2},   {"chunk", 65536},    {"pagesize", "4K"}};
  // A member by its primary group, and by a supplementary group (SO_PEERGROUPS).
  CHECK(nobody_asks(d, nogroup, {}, status, true));
  CHECK(nobody_asks(d, users, {nogroup}, status, true));
  CHECK(nobody_asks(d, nogroup, {}, create, true));
  // The arena is shared with the group: its member attaches and writes.
  CHECK(test::run_as_nobody(nogroup, {}, [&] {
          RankAttachment worker = RankAttachment::attach(real_os(), d.arena("shared"), 0, 0, {.where = d.where()});
          fill_pattern(worker.region().data(), worker.region().size(), 7);
          worker.detach();
          return true;
        }) == 0);

  // Not a member: refused, whatever it asks.
  CHECK(nobody_asks(d, users, {}, status, false));
  CHECK(nobody_asks(d, users, {}, Json{{"version", 1}, {"op", "list"}}, false));
  Json other = create;
  other["name"] = d.arena("other");
  CHECK(nobody_asks(d, users, {}, other, false));
  CHECK(nobody_asks(d, users, {}, Json{{"version", 1}, {"op", "destroy"}, {"name", d.arena("shared")}}, false));
  CHECK(access(control_segment_path(d.arena("other")).c_str(), F_OK) != 0);
  CHECK(access(control_segment_path(d.arena("shared")).c_str(), F_OK) == 0);
  // Logged, and rate-limited per uid (daemon/refusal_log.h): the first line, the rest counted.
  CHECK(d.log().find("status is refused for uid 65534 (pid ") != std::string::npos);
  CHECK(d.ask("status")["requests"]["refused"] == 4);

  // The owner of an arena may destroy it, even outside the group.
  CHECK(test::run_as_nobody(users, {}, [&] {
          ArenaOptions options = d.where();
          create_arena_with_control(real_os(), d.arena("own"), layout_for_size(1 << 20, 1, 65536), options);
          return true;
        }) == 0);
  CHECK(nobody_asks(d, users, {}, Json{{"version", 1}, {"op", "destroy"}, {"name", d.arena("own")}}, true));
  CHECK(access(control_segment_path(d.arena("own")).c_str(), F_OK) != 0);

  Json counts = d.ask("status")["requests"];
  CHECK(counts["refused"] >= 4);
  CHECK(d.stop() == 0);
}

TEST_CASE("garbage, oversized and unknown requests get an error reply and are logged; the daemon keeps serving") {
  test::TestDaemon d("garbage");
  d.set("HUGEPIN_MAX_REQUEST_BYTES", "1K");
  d.start();
  int fd = raw_connect(d.socket());
  const std::vector<std::pair<std::string, std::string>> cases{
      {"garbage\n", "the request is not JSON"},
      {std::string("\x00\x01\x02\xff\n", 5), "the request is not JSON"},
      {"{\"version\":1,\"op\":\"explode\"}\n", "unknown op 'explode'"},
      {"{\"version\":9,\"op\":\"list\"}\n", "protocol version 9 is not supported"},
      {"[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]\n", "must be a JSON object"},
      {"{\"version\":1,\"op\":\"create\",\"name\":\"x\"}\n", "'size' is missing"},
  };
  for (const auto& [request, error] : cases) {
    CAPTURE(request);
    REQUIRE(write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
    Json reply = parse_reply(read_line(fd, 30000));
    CHECK(reply["ok"] == false);
    CHECK(reply["error"].get<std::string>().find(error) != std::string::npos);
  }
  // Still the same connection, still served.
  const std::string list = "{\"version\":1,\"op\":\"list\"}\n";
  REQUIRE(write(fd, list.data(), list.size()) == static_cast<ssize_t>(list.size()));
  CHECK(parse_reply(read_line(fd, 30000))["ok"] == true);

  // Oversized: answered, then closed.
  const std::string huge(4096, 'x');
  REQUIRE(write(fd, huge.data(), huge.size()) == static_cast<ssize_t>(huge.size()));
  Json reply = parse_reply(read_line(fd, 30000));
  CHECK(reply["error"].get<std::string>().find("request longer than 1024 bytes") == 0);
  CHECK(closes(fd, 30000));
  close(fd);

  CHECK(d.ask("status")["ok"] == true);
  CHECK(d.log().find("bad request from pid ") != std::string::npos);
  CHECK(d.stop() == 0);
}

TEST_CASE("a flood of connections, some silent, some garbage, past the connection cap: each served or refused cleanly") {
  test::TestDaemon d("flood");
  d.set("HUGEPIN_MAX_CONNECTIONS", "64");
  d.set("HUGEPIN_REQUEST_TIMEOUT", "1s");
  d.start();
  constexpr int kClients = 300;
  std::vector<int> fds;
  for (int i = 0; i < kClients; ++i) {
    int fd = raw_connect(d.socket());
    const std::string request = i % 3 == 0 ? "{\"version\":1,\"op\":\"status\"}\n" : i % 3 == 1 ? "" : "junk\n";
    if (!request.empty()) {
      // A client the daemon has already refused (busy) may find its peer gone: that is a clean refusal too.
      (void)!send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    }
    fds.push_back(fd);
  }
  int served = 0, busy = 0, errors = 0, closed_silent = 0;
  for (int i = 0; i < kClients; ++i) {
    bool closed = false;
    std::string line = read_line(fds[i], 30000, &closed);
    if (line.empty()) {
      CHECK(closed);  // a silent client closed after the timeout
      ++closed_silent;
      continue;
    }
    Json reply = parse_reply(line);
    if (reply["ok"] == true) {
      CHECK(i % 3 == 0);
      ++served;
    } else if (reply["error"].get<std::string>().find("busy: ") == 0) {
      ++busy;
      CHECK(closes(fds[i], 30000));
    } else {
      CHECK(i % 3 == 2);
      CHECK(reply["error"].get<std::string>().find("not JSON") != std::string::npos);
      ++errors;
    }
  }
  for (int fd : fds) close(fd);
  CHECK(served + busy + errors + closed_silent == kClients);
  CHECK(served > 0);
  CHECK(busy > 0);
  CHECK(closed_silent > 0);
  CHECK(d.running());
  CHECK(test::TestDaemon::wait_until([&] { return d.ask("status")["connections"] == 1; }));
  CHECK(d.stop() == 0);
}

TEST_CASE("resize is refused with the reason; unknown, duplicate and out-of-scope arenas are named") {
  test::TestDaemon d("resize");
  d.start();
  REQUIRE(d.create("kv")["ok"] == true);
  Json resize = d.request(Json{{"version", 1}, {"op", "resize"}, {"name", d.arena("kv")}, {"size", "2M"}});
  CHECK(resize["ok"] == false);
  CHECK(resize["error"].get<std::string>().find("cannot grow in place while workers map them") != std::string::npos);
  Json unknown = d.request(Json{{"version", 1}, {"op", "resize"}, {"name", d.arena("none")}, {"size", "2M"}});
  CHECK(unknown["error"].get<std::string>().find(cat("no arena named '", d.arena("none"), "'")) == 0);
  Json twice = d.create("kv");
  CHECK(twice["ok"] == false);
  CHECK(twice["error"].get<std::string>().find("already exists") != std::string::npos);
  Json outside = d.request(Json{{"version", 1}, {"op", "create"}, {"name", "elsewhere"}, {"size", 65536}, {"ranks", 1}});
  CHECK(outside["error"].get<std::string>().find("outside this hugepind's arenas") != std::string::npos);
  Json destroy = d.request(Json{{"version", 1}, {"op", "destroy"}, {"name", d.arena("kv")}});
  CHECK(destroy["ok"] == true);
  CHECK(destroy["destroyed"]["region_files"] == 2);
  Json again = d.request(Json{{"version", 1}, {"op", "destroy"}, {"name", d.arena("kv")}});
  CHECK(again["ok"] == false);
  CHECK(d.stop() == 0);
}

}  // namespace hugepin
