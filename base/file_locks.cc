#include "base/file_locks.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>

#include <cstdlib>
#include <sstream>

namespace hugepin {

std::set<FileKey> parse_locked_files(std::string_view proc_locks) {
  // "1: FLOCK  ADVISORY  WRITE 18417 00:1b:65210 0 EOF"; a waiter's line has "->" after the id.
  std::set<FileKey> files;
  std::istringstream lines{std::string(proc_locks)};
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string id, type, mode, access, pid, file;
    if (!(fields >> id >> type)) continue;
    if (type == "->") continue;
    if (!(fields >> mode >> access >> pid >> file)) continue;
    // major and minor in hex, the inode in decimal.
    const size_t first = file.find(':');
    const size_t second = file.find(':', first == std::string::npos ? first : first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    char* end = nullptr;
    const unsigned long major_number = std::strtoul(file.c_str(), &end, 16);
    if (end != file.c_str() + first) continue;
    const unsigned long minor_number = std::strtoul(file.c_str() + first + 1, &end, 16);
    if (end != file.c_str() + second) continue;
    const unsigned long long inode = std::strtoull(file.c_str() + second + 1, &end, 10);
    if (end != file.c_str() + file.size() || second + 1 == file.size()) continue;
    files.insert({makedev(major_number, minor_number), static_cast<ino_t>(inode)});
  }
  return files;
}

std::optional<std::set<FileKey>> locked_files(Os& os) {
  std::string text;
  if (os.read_file("/proc/locks", &text) < 0) return std::nullopt;
  return parse_locked_files(text);
}

bool file_is_locked(Os& os, const std::string& path) {
  const int fd = os.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0);
  if (fd < 0) return false;
  struct stat st {};
  bool locked = false;
  if (os.fstat(fd, &st) == 0) {
    std::optional<std::set<FileKey>> held = locked_files(os);
    locked = (held && held->count({st.st_dev, st.st_ino}) != 0) || os.flock(fd, LOCK_SH | LOCK_NB) == -EWOULDBLOCK;
  }
  os.close(fd);  // closing drops a probe's own lock
  return locked;
}

}  // namespace hugepin
