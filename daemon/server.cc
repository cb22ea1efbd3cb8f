#include "daemon/server.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <utility>

#include "base/error.h"
#include "base/file_status.h"
#include "base/log.h"
#include "base/trusted_file.h"
#include "daemon/protocol.h"

namespace hugepin::daemon {
namespace {

constexpr size_t kReadChunk = 16 * 1024;
// Reads per connection per wake-up: one busy client cannot hold the loop.
constexpr int kReadChunksPerWake = 4;
// A client that does not read its replies is neither read from nor served while this many
// bytes of replies wait for it: its requests cannot grow the daemon's memory without bound.
constexpr size_t kReplyBacklogBytes = 64 * 1024;

bool backlogged(const std::string& out) { return out.size() >= kReplyBacklogBytes; }
constexpr int kBacklog = 4096;
// How many connections one poll round accepts before serving the others.
constexpr int kAcceptsPerRound = 64;
// How long accepting pauses when the process is out of descriptors.
constexpr int64_t kAcceptPauseNs = 100'000'000;

std::string parent_dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::optional<ino_t> inode_of(Os& os, const std::string& path) {
  std::optional<struct stat> st = stat_no_follow(os, path);
  if (!st) return std::nullopt;
  return st->st_ino;
}

// Takes the lock file of `path`, writing this process's pid into it.
UniqueFd take_lock(Os& os, const std::string& path) {
  const std::string lock_path = path + ".lock";
  // The socket's directory may be shared: a link or FIFO planted at the lock's name is refused.
  const FileRule rule{FileType::kRegular, FileOwners::kTrusted, "lock file"};
  TrustedFile file = open_trusted(os, user_named(lock_path), O_RDWR | O_CREAT, rule, 0644);
  const int fd = file.fd.get();
  if (int rc = os.flock(fd, LOCK_EX | LOCK_NB); rc < 0) {
    if (rc != -EWOULDBLOCK) throw_errno(cat("cannot lock ", lock_path), -rc);
    std::string holder;
    try {
      holder = read_opened_file(os, file, lock_path, rule, 64);
    } catch (const Error&) {
      // A pid that cannot be read back is left out of the message.
    }
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    throw Error(cat("another hugepind", holder.empty() ? "" : cat(" (pid ", holder, ")"), " serves ", path,
                    " (lock ", lock_path, ")"), EBUSY);
  }
  const std::string pid = cat(getpid(), "\n");
  os.ftruncate(fd, 0);
  os.pwrite(fd, pid.data(), pid.size(), 0);
  return std::move(file.fd);
}

}  // namespace

RequestServer RequestServer::listen(Os& os, const std::string& path, mode_t mode, std::optional<gid_t> group,
                                    const ServerLimits& limits) {
  const std::string dir = parent_dir(path);
  if (int rc = os.mkdir(dir, 0755); rc < 0 && rc != -EEXIST) throw_errno(cat("cannot create ", dir), -rc);
  RequestServer server;
  server.os_ = &os;
  server.path_ = path;
  server.limits_ = limits;
  server.lock_ = take_lock(os, path);

  const std::string temporary = cat(path, ".", getpid(), ".tmp");
  os.unlink(temporary);
  int fd = os.listen_unix(temporary, kBacklog);
  if (fd < 0) throw_errno(cat("cannot listen on ", temporary), -fd);
  server.listener_ = UniqueFd(os, fd);
  auto fail = [&](std::string_view what, int rc) {
    os.unlink(temporary);
    throw_errno(cat(what, " ", temporary), -rc);
  };
  if (int rc = os.chmod(temporary, mode); rc < 0) fail(cat("cannot set mode ", std::oct, mode, " on"), rc);
  if (group) {
    if (int rc = os.chown(temporary, static_cast<uid_t>(-1), *group); rc < 0) fail(cat("cannot give group ", *group), rc);
  }
  if (int rc = os.rename(temporary, path); rc < 0) fail(cat("cannot move into place as ", path, ":"), rc);
  server.socket_inode_ = inode_of(os, path).value_or(0);
  return server;
}

RequestServer::~RequestServer() { stop_listening(); }

RequestServer::RequestServer(RequestServer&& other) noexcept
    : os_(other.os_),
      path_(std::move(other.path_)),
      socket_inode_(std::exchange(other.socket_inode_, 0)),
      listener_(std::move(other.listener_)),
      lock_(std::move(other.lock_)),
      limits_(other.limits_),
      accept_paused_until_ns_(other.accept_paused_until_ns_),
      next_id_(other.next_id_),
      connections_(std::move(other.connections_)),
      polled_(std::move(other.polled_)) {}

RequestServer& RequestServer::operator=(RequestServer&& other) noexcept {
  if (this != &other) {
    stop_listening();
    os_ = other.os_;
    path_ = std::move(other.path_);
    socket_inode_ = std::exchange(other.socket_inode_, 0);
    listener_ = std::move(other.listener_);
    lock_ = std::move(other.lock_);
    limits_ = other.limits_;
    accept_paused_until_ns_ = other.accept_paused_until_ns_;
    next_id_ = other.next_id_;
    connections_ = std::move(other.connections_);
    polled_ = std::move(other.polled_);
  }
  return *this;
}

void RequestServer::stop_listening() {
  if (!listener_) return;
  listener_.close();
  // A newer server may have replaced the file: remove it only when it is still ours.
  if (socket_inode_ != 0 && inode_of(*os_, path_) == socket_inode_) os_->unlink(path_);
  socket_inode_ = 0;
}

bool RequestServer::quiet() const {
  for (const auto& [id, connection] : connections_) {
    if (connection.waiting || !connection.out.empty()) return false;
  }
  return true;
}

void RequestServer::add_poll_fds(std::vector<pollfd>* fds) {
  polled_.clear();
  if (listener_) {
    fds->push_back({listener_.get(), POLLIN, 0});
    polled_.push_back(0);
  }
  for (const auto& [id, connection] : connections_) {
    short events = 0;
    if (!connection.waiting && !connection.close_after_write && !connection.end_of_input && !backlogged(connection.out)) {
      events |= POLLIN;
    }
    if (!connection.out.empty()) events |= POLLOUT;
    fds->push_back({connection.fd.get(), events, 0});
    polled_.push_back(id);
  }
}

int64_t RequestServer::next_deadline() const {
  int64_t deadline = INT64_MAX;
  if (listener_ && accept_paused_until_ns_ != 0) deadline = accept_paused_until_ns_;
  for (const auto& [id, connection] : connections_) {
    if (connection.waiting) continue;
    if (!backlogged(connection.out) && connection.in.find('\n') != std::string::npos) return 0;  // lines to serve now
    deadline = std::min(deadline, connection.last_activity_ns + limits_.idle_timeout_ns);
    if (!connection.in.empty()) deadline = std::min(deadline, connection.line_started_ns + limits_.idle_timeout_ns);
  }
  return deadline;
}

void RequestServer::handle_events(std::span<const pollfd> polled, int64_t now_ns, RequestHandler& handler) {
  for (size_t i = 0; i < polled.size() && i < polled_.size(); ++i) {
    const short events = polled[i].revents;
    if (events == 0) continue;
    if (polled_[i] == 0) {
      if (now_ns >= accept_paused_until_ns_) accept_all(now_ns, handler);
      continue;
    }
    auto it = connections_.find(polled_[i]);
    if (it == connections_.end()) continue;
    Connection& connection = it->second;
    // POLLHUP: the peer closed both directions (a shutdown of its sending side alone reads as end
    // of input): nothing more can reach it, even a deferred reply.
    if ((events & (POLLHUP | POLLERR)) != 0) {
      connection.gone = true;
      continue;
    }
    if ((events & POLLIN) != 0) read_from(it->first, connection, now_ns, handler);
  }
  for (auto it = connections_.begin(); it != connections_.end();) {
    // Lines that arrived while a deferred reply was pending are served once it has gone out.
    if (!it->second.gone && !it->second.waiting && it->second.in.find('\n') != std::string::npos) {
      serve_lines(it->first, it->second, handler, now_ns);
    }
    if (!it->second.gone && !it->second.out.empty() && !write_to(it->second, now_ns)) it->second.gone = true;
    it = finished(it->second, now_ns) ? connections_.erase(it) : std::next(it);
  }
}

void RequestServer::reply(ConnectionId id, std::string line, int64_t now_ns) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Connection& connection = it->second;
  connection.waiting = false;
  connection.out += line;
  connection.last_activity_ns = now_ns;
  if (!write_to(connection, now_ns)) {
    connections_.erase(it);
    return;
  }
}

void RequestServer::accept_all(int64_t now_ns, RequestHandler& handler) {
  accept_paused_until_ns_ = 0;
  for (int round = 0; round < kAcceptsPerRound; ++round) {
    PeerCredentials peer;
    int fd = os_->accept_unix(listener_.get(), &peer);
    if (fd == -EAGAIN || fd == -EWOULDBLOCK) return;
    if (fd == -EINTR || fd == -ECONNABORTED) continue;
    if (fd < 0) {
      // Out of descriptors (EMFILE, ENFILE) or memory: the connection waits in the backlog.
      log::warn_once(cat("accept", -fd), cat("cannot accept a connection on ", path_, ": ", errno_text(-fd),
                                             " (pausing accepts briefly)"));
      accept_paused_until_ns_ = now_ns + kAcceptPauseNs;
      return;
    }
    UniqueFd connection_fd(*os_, fd);
    if (const std::string why = busy_reason(peer); !why.empty()) {
      const std::string line = reply_line(error_reply(why));
      os_->send(fd, line.data(), line.size());  // a fresh socket's buffer takes one short line
      handler.refused(peer, why);
      continue;
    }
    Connection connection;
    connection.fd = std::move(connection_fd);
    connection.peer = std::move(peer);
    connection.last_activity_ns = now_ns;
    connections_.emplace(next_id_++, std::move(connection));
  }
}

std::string RequestServer::busy_reason(const PeerCredentials& peer) const {
  const bool root = peer.uid == 0;
  const bool member = limits_.privileged_group &&
                      (peer.gid == *limits_.privileged_group ||
                       std::find(peer.groups.begin(), peer.groups.end(), *limits_.privileged_group) != peer.groups.end());
  const size_t reserved = std::min(limits_.reserved_connections, limits_.max_connections / 2);
  const size_t open_to_all = limits_.max_connections - reserved;
  if (connections_.size() >= limits_.max_connections || (!root && !member && connections_.size() >= open_to_all)) {
    return cat("busy: ", connections_.size(), " connections already (HUGEPIN_MAX_CONNECTIONS ", limits_.max_connections,
               ", of which ", reserved, " are kept for root and the daemon's group); retry");
  }
  if (root) return "";
  size_t held = 0;
  for (const auto& [id, connection] : connections_) held += connection.peer.uid == peer.uid ? 1 : 0;
  if (held < limits_.max_connections_per_uid) return "";
  return cat("busy: uid ", peer.uid, " already holds ", held, " connections (HUGEPIN_MAX_CONNECTIONS_PER_UID); retry");
}

void RequestServer::read_from(ConnectionId id, Connection& connection, int64_t now_ns, RequestHandler& handler) {
  if (connection.waiting || connection.close_after_write || connection.end_of_input || backlogged(connection.out)) return;
  char buffer[kReadChunk];
  for (int chunk = 0; chunk < kReadChunksPerWake; ++chunk) {
    ssize_t n = os_->read(connection.fd.get(), buffer, sizeof buffer);
    if (n == -EINTR) continue;
    if (n == -EAGAIN || n == -EWOULDBLOCK) break;
    if (n <= 0) {  // end of input, or a reset: serve what arrived, then close
      connection.end_of_input = true;
      break;
    }
    connection.last_activity_ns = now_ns;
    if (connection.in.empty()) connection.line_started_ns = now_ns;
    connection.in.append(buffer, static_cast<size_t>(n));
    // Serve complete lines before reading more: one client cannot make the buffer grow unbounded.
    serve_lines(id, connection, handler, now_ns);
    if (connection.waiting || connection.close_after_write || backlogged(connection.out)) return;
  }
  serve_lines(id, connection, handler, now_ns);
}

void RequestServer::serve_lines(ConnectionId id, Connection& connection, RequestHandler& handler, int64_t now_ns) {
  while (!connection.waiting && !connection.close_after_write && !backlogged(connection.out)) {
    const size_t newline = connection.in.find('\n');
    const size_t length = newline == std::string::npos ? connection.in.size() : newline;
    if (length > limits_.max_request_bytes) {
      const std::string why = cat("request longer than ", limits_.max_request_bytes,
                                  " bytes (HUGEPIN_MAX_REQUEST_BYTES): closing the connection");
      connection.out += reply_line(error_reply(why));
      connection.in.clear();
      connection.close_after_write = true;
      handler.refused(connection.peer, why);
      return;
    }
    if (newline == std::string::npos) return;
    std::string line = connection.in.substr(0, newline);
    connection.in.erase(0, newline + 1);
    connection.line_started_ns = now_ns;  // what is left began no earlier than this
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::optional<std::string> answer = handler.handle(id, connection.peer, line);
    if (answer) {
      connection.out += *answer;
    } else {
      connection.waiting = true;
    }
  }
}

bool RequestServer::write_to(Connection& connection, int64_t now_ns) {
  while (!connection.out.empty()) {
    ssize_t n = os_->send(connection.fd.get(), connection.out.data(), connection.out.size());
    if (n == -EINTR) continue;
    if (n == -EAGAIN || n == -EWOULDBLOCK) return true;
    if (n < 0) return false;  // the peer is gone (EPIPE, ECONNRESET)
    connection.out.erase(0, static_cast<size_t>(n));
    connection.last_activity_ns = now_ns;
  }
  return true;
}

bool RequestServer::finished(const Connection& connection, int64_t now_ns) const {
  if (connection.gone) return true;
  if (connection.waiting) return false;
  if (!connection.out.empty()) return now_ns - connection.last_activity_ns > limits_.idle_timeout_ns;
  if (connection.close_after_write || connection.end_of_input) return true;
  // A request trickled in a byte at a time keeps the connection active but never completes:
  // the timeout runs from the first byte of the unfinished line.
  if (!connection.in.empty() && connection.in.find('\n') == std::string::npos &&
      now_ns - connection.line_started_ns > limits_.idle_timeout_ns) {
    return true;
  }
  return now_ns - connection.last_activity_ns > limits_.idle_timeout_ns;
}

}  // namespace hugepin::daemon
