#include "cli/plan_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/error.h"
#include "session/host_plan.h"

namespace hugepin::cli {
namespace {

// A plan input is a few kilobytes of JSON; anything past this is not one.
constexpr uint64_t kMaxPlanInputBytes = 16 << 20;

std::string read_text_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw_errno(cat("cannot open plan input ", path), errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(cat("plan input ", path, " is not a regular file"));
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxPlanInputBytes) {
    ::close(fd);
    throw Error(cat("plan input ", path, " is ", st.st_size, " bytes: a plan input is at most 16 MiB of JSON"));
  }
  std::string text;
  char buffer[65536];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int error = errno;
      ::close(fd);
      throw_errno(cat("cannot read plan input ", path), error);
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > kMaxPlanInputBytes) {  // it grew while being read
      ::close(fd);
      throw Error(cat("plan input ", path, " is more than 16 MiB: not a plan input"));
    }
  }
  ::close(fd);
  return text;
}

}  // namespace

planner::CapacityPlan plan_from_file(Os& os, const std::string& path) {
  std::string text = read_text_file(path);
  try {
    return plan_on_host(os, text);
  } catch (const Error& error) {
    throw Error(cat(path, ": ", error.what()), error.errno_value());
  }
}

}  // namespace hugepin::cli
