// The request socket in one process: the test plays the clients and drives the server's loop
// with chosen clock values (no sleeping, no timing assertions).
#include "daemon/server.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "daemon/protocol.h"
#include "tests/support/fault_os.h"
#include "tests/support/temp_dir.h"

namespace hugepin::daemon {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

// Answers each line with {"ok":true,"echo":line}; defers "defer".
class EchoHandler : public RequestHandler {
 public:
  std::optional<std::string> handle(ConnectionId id, const PeerCredentials& peer, std::string_view line) override {
    last_peer = peer;
    ++handled;
    if (line == "defer") {
      deferred.push_back(id);
      return std::nullopt;
    }
    Json reply = ok_reply();
    reply["echo"] = line;
    return reply_line(reply);
  }
  void refused(const PeerCredentials&, std::string_view why) override { refusals.emplace_back(why); }

  std::vector<ConnectionId> deferred;
  std::vector<std::string> refusals;
  long handled = 0;
  PeerCredentials last_peer;
};

int connect_to(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  REQUIRE(connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
  return fd;
}

void send_text(int fd, const std::string& text) { REQUIRE(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size())); }

// One round of the server's loop at `now_ns`.
void pump(RequestServer& server, EchoHandler& handler, int64_t now_ns) {
  std::vector<pollfd> fds;
  server.add_poll_fds(&fds);
  poll(fds.data(), fds.size(), 20);
  server.handle_events(fds, now_ns, handler);
}

// What the client has received so far (non-blocking); `closed` set at end of stream.
std::string take(int fd, bool* closed = nullptr) {
  std::string text;
  char buffer[4096];
  for (;;) {
    ssize_t n = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n > 0) {
      text.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (closed != nullptr) *closed = n == 0;
    return text;
  }
}

// Pumps at `now_ns` until the client has `lines` whole lines (at most a few hundred rounds).
std::string reply_of(RequestServer& server, EchoHandler& handler, int fd, int64_t now_ns, long lines = 1) {
  std::string text;
  for (int round = 0; round < 500 && std::count(text.begin(), text.end(), '\n') < lines; ++round) {
    pump(server, handler, now_ns);
    text += take(fd);
  }
  return text;
}

// Hands out the next of `peers` as the credentials of each connection accepted.
class ChosenPeersOs final : public test::ForwardingOs {
 public:
  ChosenPeersOs(Os& target, std::vector<PeerCredentials> peers) : ForwardingOs(target), peers_(std::move(peers)) {}
  int accept_unix(int listen_fd, PeerCredentials* peer) override {
    const int fd = ForwardingOs::accept_unix(listen_fd, peer);
    if (fd >= 0 && next_ < peers_.size()) *peer = peers_[next_++];
    return fd;
  }

 private:
  std::vector<PeerCredentials> peers_;
  size_t next_ = 0;
};

struct Fixture {
  test::TempDir dir;
  std::string path = dir.path() + "/s.sock";
  ServerLimits limits{2, 10 * kSecond, 128};
};

}  // namespace

TEST_CASE("the socket appears with its mode and group; a second server on it is refused") {
  Fixture f;
  RequestServer server = RequestServer::listen(real_os(), f.path, 0640, getgid(), f.limits);
  struct stat st {};
  REQUIRE(stat(f.path.c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  CHECK((st.st_mode & 07777) == 0640);
  CHECK(st.st_gid == getgid());
  try {
    RequestServer::listen(real_os(), f.path, 0640, std::nullopt, f.limits);
    FAIL("a second server started");
  } catch (const Error& error) {
    CHECK(error.errno_value() == EBUSY);
    CHECK(std::string(error.what()).find(cat("another hugepind (pid ", getpid(), ") serves ", f.path)) == 0);
  }
  server.stop_listening();
  CHECK(access(f.path.c_str(), F_OK) != 0);
}

TEST_CASE("lines are served in order with the peer's credentials; a deferred reply holds the connection") {
  Fixture f;
  RequestServer server = RequestServer::listen(real_os(), f.path, 0600, std::nullopt, f.limits);
  EchoHandler handler;
  int fd = connect_to(f.path);
  send_text(fd, "one\r\ntwo\n\n");
  std::string text = reply_of(server, handler, fd, 0, 2);
  CHECK(text == "{\"version\":1,\"ok\":true,\"echo\":\"one\"}\n{\"version\":1,\"ok\":true,\"echo\":\"two\"}\n");
  CHECK(handler.last_peer.pid == getpid());
  CHECK(handler.last_peer.uid == geteuid());
  CHECK(handler.last_peer.gid == getegid());

  send_text(fd, "defer\nafter\n");
  for (int round = 0; round < 50; ++round) pump(server, handler, 0);
  REQUIRE(handler.deferred.size() == 1);
  CHECK(take(fd).empty());  // nothing until the deferred reply: "after" waits
  // A waiting connection does not time out.
  pump(server, handler, 100 * kSecond);
  CHECK(server.connections() == 1);
  server.reply(handler.deferred[0], "late\n", 100 * kSecond);
  std::string rest = reply_of(server, handler, fd, 100 * kSecond, 2);
  CHECK(rest == "late\n{\"version\":1,\"ok\":true,\"echo\":\"after\"}\n");
  close(fd);
}

TEST_CASE("an oversized request is answered and the connection closed") {
  Fixture f;
  RequestServer server = RequestServer::listen(real_os(), f.path, 0600, std::nullopt, f.limits);
  EchoHandler handler;
  int fd = connect_to(f.path);
  send_text(fd, std::string(200, 'x'));
  std::string text = reply_of(server, handler, fd, 0);
  CHECK(text.find("request longer than 128 bytes") != std::string::npos);
  bool closed = false;
  for (int round = 0; round < 500 && !closed; ++round) {
    pump(server, handler, 0);
    take(fd, &closed);
  }
  CHECK(closed);
  CHECK(handler.refusals.size() == 1);
  close(fd);
}

TEST_CASE("beyond max_connections a client is told busy; idle connections are closed after the timeout") {
  Fixture f;
  RequestServer server = RequestServer::listen(real_os(), f.path, 0600, std::nullopt, f.limits);
  EchoHandler handler;
  int a = connect_to(f.path);
  int b = connect_to(f.path);
  for (int round = 0; round < 500 && server.connections() < 2; ++round) pump(server, handler, 0);
  REQUIRE(server.connections() == 2);
  int c = connect_to(f.path);
  std::string busy = reply_of(server, handler, c, 0);
  CHECK(busy.find("\"ok\":false") != std::string::npos);
  CHECK(busy.find("busy: 2 connections already") != std::string::npos);
  CHECK(handler.refusals.size() == 1);
  CHECK(server.connections() == 2);

  CHECK(server.next_deadline() == 10 * kSecond);
  pump(server, handler, 10 * kSecond + 1);
  CHECK(server.connections() == 0);
  bool closed = false;
  take(a, &closed);
  CHECK(closed);
  for (int fd : {a, b, c}) close(fd);
}

// Issue 20, item 6: 2,000 connections held by one client made root's `status` answer "busy".
TEST_CASE("one uid's crowd of connections cannot lock root out: a per-uid limit and a reserve") {
  Fixture f;
  REQUIRE(chmod(f.dir.path().c_str(), 0755) == 0);
  ServerLimits limits{8, 10 * kSecond, 128};
  limits.max_connections_per_uid = 4;
  limits.reserved_connections = 2;
  RequestServer server = RequestServer::listen(real_os(), f.path, 0666, std::nullopt, limits);
  EchoHandler handler;
  int connected[2];
  int release[2];
  REQUIRE(pipe(connected) == 0);
  REQUIRE(pipe(release) == 0);
  std::fflush(nullptr);
  const pid_t crowd = fork();
  REQUIRE(crowd >= 0);
  if (crowd == 0) {
    // uid 65534 takes every connection there is, and holds them until released (or the test ends:
    // its end of the pipe closes with it).
    close(connected[0]);
    close(release[1]);
    char byte = 0;
    if (setgroups(0, nullptr) == 0 && setgid(65534) == 0 && setuid(65534) == 0) {
      for (int i = 0; i < 8; ++i) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::strncpy(address.sun_path, f.path.c_str(), sizeof address.sun_path - 1);
        if (fd >= 0 && connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0) ++byte;
      }
    }
    (void)!write(connected[1], &byte, 1);
    (void)!read(release[0], &byte, 1);
    _exit(0);
  }
  char made = 0;
  REQUIRE(read(connected[0], &made, 1) == 1);
  REQUIRE(made == 8);
  for (int round = 0; round < 500 && server.connections() + handler.refusals.size() < 8; ++round) pump(server, handler, 0);
  CHECK(server.connections() == 4);
  CHECK(handler.refusals.size() == 4);
  CHECK((!handler.refusals.empty() &&
         handler.refusals[0] == "busy: uid 65534 already holds 4 connections (HUGEPIN_MAX_CONNECTIONS_PER_UID); retry"));
  // Root is still answered.
  int root = connect_to(f.path);
  send_text(root, "status\n");
  CHECK(reply_of(server, handler, root, 0) == "{\"version\":1,\"ok\":true,\"echo\":\"status\"}\n");
  close(root);
  (void)!write(release[1], &made, 1);
  int status = 0;
  waitpid(crowd, &status, 0);
  for (int fd : {connected[0], connected[1], release[0], release[1]}) close(fd);
}

TEST_CASE("the last connections are kept for root and the daemon's group") {
  Fixture f;
  ServerLimits limits{4, 10 * kSecond, 128};
  limits.reserved_connections = 2;
  limits.privileged_group = 4242;
  ChosenPeersOs os(real_os(), {{1, 1000, 1000, {}}, {2, 1001, 1001, {}}, {3, 1002, 1002, {}}, {4, 1003, 1003, {4242}},
                               {5, 0, 0, {}}, {6, 1004, 1004, {4242}}});
  RequestServer server = RequestServer::listen(os, f.path, 0600, std::nullopt, limits);
  EchoHandler handler;
  std::vector<int> clients;
  for (size_t n = 1; n <= 6; ++n) {  // one at a time: the peers are handed out in order
    clients.push_back(connect_to(f.path));
    for (int round = 0; round < 500 && server.connections() + handler.refusals.size() < n; ++round) {
      pump(server, handler, 0);
    }
  }
  // Two strangers fill what is open to all; the third is refused; a member and root take the
  // reserve; past it, a member is refused too.
  CHECK(server.connections() == 4);
  REQUIRE(handler.refusals.size() == 2);
  CHECK(handler.refusals[0] == "busy: 2 connections already (HUGEPIN_MAX_CONNECTIONS 4, of which 2 are kept for root "
                               "and the daemon's group); retry");
  CHECK(handler.refusals[1].rfind("busy: 4 connections already", 0) == 0);
  for (int fd : clients) close(fd);
}

TEST_CASE("when accept fails for want of descriptors, accepting pauses and resumes") {
  Fixture f;
  test::FaultInjectionOs os(real_os());
  RequestServer server = RequestServer::listen(os, f.path, 0600, std::nullopt, f.limits);
  EchoHandler handler;
  os.fail("accept_unix", EMFILE);
  int fd = connect_to(f.path);
  send_text(fd, "hello\n");
  pump(server, handler, kSecond);
  CHECK(server.connections() == 0);
  CHECK(server.next_deadline() == kSecond + 100'000'000);
  std::string text = reply_of(server, handler, fd, 2 * kSecond);
  CHECK(text == "{\"version\":1,\"ok\":true,\"echo\":\"hello\"}\n");
  CHECK(os.calls("accept_unix") >= 2);
  close(fd);
}

TEST_CASE("a peer that goes away while its reply is deferred is dropped, and the reply with it") {
  Fixture f;
  RequestServer server = RequestServer::listen(real_os(), f.path, 0600, std::nullopt, f.limits);
  EchoHandler handler;
  int fd = connect_to(f.path);
  send_text(fd, "defer\n");
  for (int round = 0; round < 500 && handler.deferred.empty(); ++round) pump(server, handler, 0);
  REQUIRE(handler.deferred.size() == 1);
  close(fd);
  for (int round = 0; round < 500 && server.connections() > 0; ++round) pump(server, handler, 0);
  CHECK(server.connections() == 0);
  server.reply(handler.deferred[0], "nobody\n", 0);  // dropped, no crash
  CHECK(server.quiet());
}

TEST_CASE("a client that does not read its replies is not served beyond a bounded backlog") {
  Fixture f;
  f.limits.max_request_bytes = 1024;
  RequestServer server = RequestServer::listen(real_os(), f.path, 0600, std::nullopt, f.limits);
  EchoHandler handler;
  int fd = connect_to(f.path);
  REQUIRE(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
  // Up to 8 MiB of one-line requests, as fast as the sockets take them, never reading a reply.
  const std::string chunk(64 * 1024, 'x');
  std::string lines;
  for (size_t i = 0; i < chunk.size() / 2; ++i) lines += "x\n";
  size_t sent = 0;
  for (int round = 0; round < 128; ++round) {
    ssize_t n = send(fd, lines.data(), lines.size(), MSG_NOSIGNAL);
    if (n > 0) sent += static_cast<size_t>(n);
    pump(server, handler, 0);
  }
  for (int round = 0; round < 20; ++round) pump(server, handler, 0);
  const long served = handler.handled;
  for (int round = 0; round < 20; ++round) pump(server, handler, 0);
  CHECK(handler.handled == served);       // no progress while the replies wait
  CHECK(static_cast<size_t>(served) < sent / 2);  // not every line sent was served
  // Once the client reads, serving resumes.
  take(fd);
  for (int round = 0; round < 20; ++round) pump(server, handler, 0);
  CHECK(handler.handled > served);
  close(fd);
}

TEST_CASE("a request trickled in a byte at a time times out from its first byte") {
  Fixture f;
  RequestServer server = RequestServer::listen(real_os(), f.path, 0600, std::nullopt, f.limits);
  EchoHandler handler;
  int fd = connect_to(f.path);
  for (int round = 0; round < 500 && server.connections() < 1; ++round) pump(server, handler, 0);
  REQUIRE(server.connections() == 1);
  // A byte at 0 s and at 6 s: at 11 s the connection has been idle for 5 s only (under the 10 s
  // timeout), but its line began 11 s ago and is still not finished.
  for (int64_t t : {0LL, 6LL}) {
    send_text(fd, "a");
    pump(server, handler, t * kSecond);
    CHECK(server.connections() == 1);
  }
  pump(server, handler, 9 * kSecond);
  CHECK(server.connections() == 1);
  pump(server, handler, 11 * kSecond);
  CHECK(server.connections() == 0);
  CHECK(handler.handled == 0);
  close(fd);
}

}  // namespace hugepin::daemon
