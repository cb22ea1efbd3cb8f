// Errors that hugepin reports to its users.
//
// Every failure is a one-line message that names the value at fault and, where one exists,
// the fix ("reserve 512 more 2 MiB pages on node 1: hugepin pool set ..."). The errno behind a
// failure is captured at the call that failed and carried here, never read later from the
// global (liburing and leveldb do the same).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace hugepin {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, int errno_value = 0)
      : std::runtime_error(message), errno_value_(errno_value) {}

  // The errno of the failed call, or 0 when the failure did not come from a system call.
  int errno_value() const noexcept { return errno_value_; }

 private:
  int errno_value_;
};

// Concatenates anything that streams into one string: the message builder for errors and logs
// (g++ 12 has no <format>).
template <typename... Parts>
std::string cat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}

// "No such file or directory (ENOENT)": the text and the symbolic name of an errno value.
std::string errno_text(int errno_value);

// Throws Error("<context>: <errno text>", errno_value). `errno_value` is positive.
[[noreturn]] void throw_errno(std::string_view context, int errno_value);

}  // namespace hugepin
