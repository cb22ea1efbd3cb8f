// hugepind's request socket: a Unix stream socket, its connections, and the limits that keep one
// client from hurting the others. Requests are lines (daemon/protocol.h); the server frames them,
// hands each to a RequestHandler with the peer's kernel-given credentials, and writes replies
// back without ever blocking:
//
//   - accept is non-blocking; beyond `max_connections` a client is answered "busy" and closed;
//     when the process runs out of descriptors, accepting pauses briefly instead of spinning
//   - one uid holds at most `max_connections_per_uid` connections (root is not limited by it),
//     and the last `reserved_connections` of `max_connections` are kept for root and members of
//     `privileged_group`: 2,000 connections of one client no longer lock root out (issue 20)
//   - a line longer than `max_request_bytes` is answered with an error and the connection closed
//   - a connection idle for `idle_timeout_ns` (nothing received, nothing sent, no reply pending)
//     is closed: a client that connects and sends nothing costs a descriptor for that long
//   - a reply may be deferred (a create that prefaults for minutes): the connection then reads
//     nothing more and does not time out until RequestServer::reply delivers it
//
// Thread-safety: one thread at a time (the daemon's loop). Move-only: owns the socket, the lock
// and the connections.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/os.h"
#include "base/unique_fd.h"

namespace hugepin::daemon {

struct ServerLimits {
  size_t max_connections = 256;
  int64_t idle_timeout_ns = 10'000'000'000;
  size_t max_request_bytes = 64 * 1024;
  size_t max_connections_per_uid = 32;
  size_t reserved_connections = 16;  // at most half of max_connections are ever kept
  std::optional<gid_t> privileged_group;
};

using ConnectionId = uint64_t;

// What the server hands requests to.
class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  // One complete request line (without its newline). Returns the reply line (with its newline)
  // now, or nullopt when it will come later through RequestServer::reply.
  virtual std::optional<std::string> handle(ConnectionId id, const PeerCredentials& peer, std::string_view line) = 0;
  // The server answered a client itself (busy, oversized request): `why` is the reply's error.
  virtual void refused(const PeerCredentials& peer, std::string_view why) = 0;
};

class RequestServer {
 public:
  // Creates the socket at `path` (and its directory when missing, 0755): bound under a temporary
  // name, given `mode` and `group`, then renamed into place, so that no client ever finds it with
  // other permissions. Holds an exclusive lock on `path`.lock for its life. Throws Error: another
  // server holds the lock (naming its pid), the directory cannot be made, a system call fails.
  static RequestServer listen(Os& os, const std::string& path, mode_t mode, std::optional<gid_t> group,
                              const ServerLimits& limits);

  RequestServer() = default;
  ~RequestServer();
  RequestServer(RequestServer&&) noexcept;
  RequestServer& operator=(RequestServer&&) noexcept;
  RequestServer(const RequestServer&) = delete;
  RequestServer& operator=(const RequestServer&) = delete;

  void set_limits(const ServerLimits& limits) { limits_ = limits; }
  const std::string& path() const { return path_; }

  // Appends the descriptors to poll and their events; handle_events takes the same entries back.
  void add_poll_fds(std::vector<pollfd>* fds);
  // CLOCK_MONOTONIC ns at which a connection times out or accepting resumes; INT64_MAX: never.
  int64_t next_deadline() const;
  // Acts on what poll reported for the entries add_poll_fds appended, then on timeouts at `now_ns`.
  void handle_events(std::span<const pollfd> polled, int64_t now_ns, RequestHandler& handler);

  // Sends the deferred reply of connection `id`; dropped when that connection has gone.
  void reply(ConnectionId id, std::string line, int64_t now_ns);

  // Closes the listening socket and removes the socket file, if it is still the one this server
  // made. Connections stay until they finish.
  void stop_listening();
  // Connections open now, and whether every one has nothing pending (no deferred reply, nothing
  // unsent).
  size_t connections() const { return connections_.size(); }
  bool quiet() const;
  // Closes every connection now.
  void close_all() { connections_.clear(); }

 private:
  struct Connection {
    UniqueFd fd;
    PeerCredentials peer;
    std::string in;
    std::string out;
    bool waiting = false;            // a deferred reply is pending
    bool close_after_write = false;
    bool end_of_input = false;       // the peer shut its sending side
    bool gone = false;               // the peer closed, or a write failed: close now
    int64_t last_activity_ns = 0;
    int64_t line_started_ns = 0;     // when the first byte of the unfinished line in `in` arrived
  };

  void accept_all(int64_t now_ns, RequestHandler& handler);
  // Why `peer` may not have one more connection now; "" when it may.
  std::string busy_reason(const PeerCredentials& peer) const;
  void read_from(ConnectionId id, Connection& connection, int64_t now_ns, RequestHandler& handler);
  void serve_lines(ConnectionId id, Connection& connection, RequestHandler& handler, int64_t now_ns);
  // False when the connection is to be closed.
  bool write_to(Connection& connection, int64_t now_ns);
  bool finished(const Connection& connection, int64_t now_ns) const;

  Os* os_ = nullptr;
  std::string path_;
  ino_t socket_inode_ = 0;
  UniqueFd listener_;
  UniqueFd lock_;
  ServerLimits limits_;
  int64_t accept_paused_until_ns_ = 0;
  ConnectionId next_id_ = 1;
  std::map<ConnectionId, Connection> connections_;
  std::vector<ConnectionId> polled_;  // the connection of each entry add_poll_fds appended (0: the listener)
};

}  // namespace hugepin::daemon
