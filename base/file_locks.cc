#include "base/file_locks.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace hugepin {
namespace {

struct flock whole_file(short type) {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = 0;
  lock.l_len = 0;  // to the end, however long the file grows
  return lock;
}

}  // namespace

int lock_file_for_use(Os& os, int fd) {
  struct flock lock = whole_file(F_WRLCK);
  return os.fcntl_lock(fd, F_OFD_SETLK, &lock);
}

bool file_is_locked(Os& os, const std::string& path) {
  const int fd = os.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0);
  if (fd == -ENOENT) return false;
  if (fd < 0) return true;
  struct flock lock = whole_file(F_RDLCK);
  const int rc = os.fcntl_lock(fd, F_OFD_GETLK, &lock);
  os.close(fd);
  return rc < 0 || lock.l_type != F_UNLCK;
}

}  // namespace hugepin
