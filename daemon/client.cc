#include "daemon/client.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>

#include "base/error.h"

namespace hugepin::daemon {
namespace {

constexpr std::string_view kDefaultSocket = "/run/hugepin/hugepind.sock";

}  // namespace

std::string default_socket_path(const OptionSource& environment) {
  const char* value = environment(option_spec(Option::kSocket).variable.data());
  return value != nullptr && *value != '\0' ? std::string(value) : std::string(kDefaultSocket);
}

DaemonClient DaemonClient::connect(Os& os, const std::string& socket_path) {
  int fd = os.connect_unix(socket_path);
  if (fd < 0) {
    const std::string hint = fd == -ENOENT || fd == -ECONNREFUSED
                                 ? " (is hugepind running? systemctl status hugepind; HUGEPIN_SOCKET or --socket names another socket)"
                             : fd == -EACCES ? " (only root and members of hugepind's group may connect)"
                                             : "";
    throw_errno(cat("cannot connect to hugepind at ", socket_path, hint), -fd);
  }
  DaemonClient client;
  client.os_ = &os;
  client.path_ = socket_path;
  client.fd_ = UniqueFd(os, fd);
  return client;
}

std::string DaemonClient::exchange(std::string_view line, int64_t timeout_ns) {
  std::string out(line);
  if (out.empty() || out.back() != '\n') out.push_back('\n');
  size_t sent = 0;
  while (sent < out.size()) {
    ssize_t n = os_->send(fd_.get(), out.data() + sent, out.size() - sent);
    if (n == -EINTR) continue;
    if (n < 0) throw_errno(cat("cannot send a request to hugepind at ", path_), static_cast<int>(-n));
    sent += static_cast<size_t>(n);
  }
  const int64_t deadline = timeout_ns < 0 ? -1 : os_->monotonic_ns() + timeout_ns;
  for (;;) {
    if (size_t newline = buffered_.find('\n'); newline != std::string::npos) {
      std::string reply = buffered_.substr(0, newline);
      buffered_.erase(0, newline + 1);
      return reply;
    }
    int wait_ms = -1;
    if (deadline >= 0) {
      const int64_t left = deadline - os_->monotonic_ns();
      if (left <= 0) throw Error(cat("hugepind at ", path_, " did not reply within ", timeout_ns / 1'000'000, " ms"), ETIMEDOUT);
      wait_ms = static_cast<int>(std::min<int64_t>(left / 1'000'000 + 1, 60'000));
    }
    pollfd entry{fd_.get(), POLLIN, 0};
    int ready = os_->poll(&entry, 1, wait_ms);
    if (ready == -EINTR || ready == 0) continue;
    if (ready < 0) throw_errno("poll", -ready);
    char buffer[16384];
    ssize_t n = os_->read(fd_.get(), buffer, sizeof buffer);
    if (n == -EINTR || n == -EAGAIN) continue;
    if (n < 0) throw_errno(cat("cannot read hugepind's reply from ", path_), static_cast<int>(-n));
    if (n == 0) throw Error(cat("hugepind at ", path_, " closed the connection without a reply"), ECONNRESET);
    buffered_.append(buffer, static_cast<size_t>(n));
  }
}

Json DaemonClient::request(const Json& request, int64_t timeout_ns) {
  const std::string line = exchange(request.dump(), timeout_ns);
  Json reply = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (reply.is_discarded() || !reply.is_object()) {
    throw Error(cat("hugepind at ", path_, " sent a reply that is not a JSON object: '", line.substr(0, 80), "'"));
  }
  return reply;
}

}  // namespace hugepin::daemon
