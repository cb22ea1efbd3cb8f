#include "daemon/notify.h"

#include <charconv>
#include <cstdint>

#include "base/error.h"
#include "base/log.h"

namespace hugepin::daemon {
namespace {

std::string variable(const OptionSource& environment, const char* name) {
  const char* value = environment(name);
  return value == nullptr ? std::string() : std::string(value);
}

template <typename Number>
bool parse_number(const std::string& text, Number* out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

// Status text on one line: a newline would start another variable.
std::string one_line(std::string_view text) {
  std::string line(text);
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return line;
}

}  // namespace

Notifier Notifier::from_environment(Os& os, const OptionSource& environment, pid_t self) {
  Notifier notifier;
  notifier.os_ = &os;
  notifier.socket_ = variable(environment, "NOTIFY_SOCKET");
  if (notifier.socket_.empty()) return notifier;
  const std::string usec = variable(environment, "WATCHDOG_USEC");
  if (usec.empty()) return notifier;
  const std::string pid = variable(environment, "WATCHDOG_PID");
  pid_t watched = self;
  if (!pid.empty() && !parse_number(pid, &watched)) {
    log::warn(cat("WATCHDOG_PID='", pid, "' is not a pid: no watchdog pings"));
    return notifier;
  }
  if (watched != self) return notifier;  // the watchdog is another process's
  uint64_t micros = 0;
  if (!parse_number(usec, &micros) || micros == 0 || micros > INT64_MAX / 1000) {
    log::warn(cat("WATCHDOG_USEC='", usec, "' is not a positive number of microseconds: no watchdog pings"));
    return notifier;
  }
  notifier.watchdog_interval_ns_ = static_cast<int64_t>(micros) * 1000 / 2;
  return notifier;
}

int Notifier::send(std::string_view message) {
  if (!active()) return 0;
  int rc = os_->send_datagram(socket_, message);
  if (rc < 0) {
    log::warn_once(cat("notify", -rc), cat("cannot notify the service manager at NOTIFY_SOCKET=", socket_, ": ",
                                           errno_text(-rc)));
  }
  return rc;
}

void Notifier::ready(std::string_view status) {
  last_status_ = one_line(status);
  send(cat("READY=1\nSTATUS=", last_status_));
}

void Notifier::status(std::string_view status) {
  std::string line = one_line(status);
  if (line == last_status_) return;
  last_status_ = line;
  send(cat("STATUS=", line));
}

void Notifier::watchdog() { send("WATCHDOG=1"); }

void Notifier::reloading() { send("RELOADING=1"); }

void Notifier::stopping() { send("STOPPING=1"); }

}  // namespace hugepin::daemon
