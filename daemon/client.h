// A client of hugepind: connects to its socket, sends one request line, reads one reply line.
// `hugepin daemon ...` and the tests use it.
//
// Thread-safety: one thread at a time per client. Move-only: owns the socket.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/options.h"
#include "base/os.h"
#include "base/unique_fd.h"
#include "daemon/protocol.h"

namespace hugepin::daemon {

// HUGEPIN_SOCKET from `environment`, else /run/hugepin/hugepind.sock.
std::string default_socket_path(const OptionSource& environment);

class DaemonClient {
 public:
  // Connects to `socket_path`. Throws Error naming the socket (and that hugepind may not run).
  static DaemonClient connect(Os& os, const std::string& socket_path);

  DaemonClient() = default;

  // Sends `line` (a newline is added when missing) and returns the reply line without its
  // newline. Waits at most `timeout_ns` for the reply (negative: no limit; a create may prefault
  // for minutes). Throws Error: the daemon closed the connection, the wait timed out, a system
  // call failed.
  std::string exchange(std::string_view line, int64_t timeout_ns = -1);

  // exchange() of `request`, the reply parsed. Throws Error when the reply is not a JSON object.
  Json request(const Json& request, int64_t timeout_ns = -1);

  int fd() const { return fd_.get(); }

 private:
  Os* os_ = nullptr;
  std::string path_;
  UniqueFd fd_;
  std::string buffered_;  // bytes after the last reply's newline
};

}  // namespace hugepin::daemon
