#include "base/file_status.h"

#include <fcntl.h>

namespace hugepin {

std::optional<struct stat> stat_no_follow(Os& os, const std::string& path) {
  const int fd = os.open(path, O_PATH | O_NOFOLLOW, 0);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  const int rc = os.fstat(fd, &st);
  os.close(fd);
  if (rc < 0) return std::nullopt;
  return st;
}

}  // namespace hugepin
