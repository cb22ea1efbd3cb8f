#include "base/process.h"

#include <cerrno>
#include <charconv>
#include <string>
#include <unistd.h>

#include "base/error.h"

namespace hugepin {

std::optional<ProcStat> parse_proc_stat(std::string_view text) {
  // "pid (comm) state ppid ...": comm may hold anything, so fields count from the last ')'.
  size_t close = text.rfind(')');
  if (close == std::string_view::npos || close + 2 >= text.size()) return std::nullopt;
  std::string_view rest = text.substr(close + 2);  // field 3 onwards
  ProcStat stat;
  stat.state = rest.front();
  // Field 22 (starttime) is the 20th field after the ')'.
  for (int field = 3; field < 22; ++field) {
    size_t space = rest.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(space + 1);
  }
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), stat.start_ticks);
  if (ec != std::errc() || (end != rest.data() + rest.size() && *end != ' ' && *end != '\n')) return std::nullopt;
  return stat;
}

namespace {

// -ENOENT: no such process; -EINVAL: malformed; 0: `out` is set.
int read_proc_stat(Os& os, const std::string& path, ProcStat* out) {
  std::string text;
  if (int rc = os.read_file(path, &text); rc < 0) return rc;
  std::optional<ProcStat> stat = parse_proc_stat(text);
  if (!stat) return -EINVAL;
  *out = *stat;
  return 0;
}

bool exited(char state) { return state == 'Z' || state == 'X' || state == 'x'; }

}  // namespace

std::optional<ProcessIdentity> read_process_identity(Os& os, pid_t pid) {
  if (pid <= 0) return std::nullopt;
  ProcStat stat;
  if (read_proc_stat(os, cat("/proc/", pid, "/stat"), &stat) < 0 || exited(stat.state)) return std::nullopt;
  return ProcessIdentity{pid, stat.start_ticks};
}

ProcessIdentity self_identity(Os& os) {
  ProcStat stat;
  if (int rc = read_proc_stat(os, "/proc/self/stat", &stat); rc < 0) throw_errno("cannot read /proc/self/stat", -rc);
  return ProcessIdentity{getpid(), stat.start_ticks};
}

bool is_process_alive(Os& os, pid_t pid, uint64_t start_ticks, uint64_t start_ticks_mask) {
  if (pid <= 0) return false;
  if (os.send_signal(pid, 0) == -ESRCH) return false;
  ProcStat stat;
  if (read_proc_stat(os, cat("/proc/", pid, "/stat"), &stat) < 0) {
    return os.send_signal(pid, 0) != -ESRCH;  // /proc hidden from us: the pid alone decides
  }
  return !exited(stat.state) && (stat.start_ticks & start_ticks_mask) == (start_ticks & start_ticks_mask);
}

}  // namespace hugepin
