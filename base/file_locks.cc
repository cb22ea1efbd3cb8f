#include "base/file_locks.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

#include "base/error.h"
#include "base/trusted_file.h"

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
  TrustedFile file;
  try {
    // Anyone's file may be asked about; a link, FIFO or device is never opened (trusted_file.h).
    file = open_trusted(os, user_named(path), O_RDONLY, {FileType::kRegular, FileOwners::kAny, "file"});
  } catch (const Error& error) {
    // Nothing there, or nothing a process could map (a link, a socket, a directory): not in use.
    const int code = error.errno_value();
    if (code == ENOENT || code == kRefusedErrno || code == ENOTDIR || code == EISDIR) return false;
    return true;  // EACCES, EMFILE, ENOMEM...: cannot tell, so in use
  }
  struct flock lock = whole_file(F_RDLCK);
  const int rc = os.fcntl_lock(file.fd.get(), F_OFD_GETLK, &lock);
  return rc < 0 || lock.l_type != F_UNLCK;
}

int lock_shared_while_linked(Os& os, int fd, int64_t timeout_ns) {
  const int64_t deadline = os.monotonic_ns() + timeout_ns;
  int rc;
  while ((rc = os.flock(fd, LOCK_SH | LOCK_NB)) == -EWOULDBLOCK) {
    if (os.monotonic_ns() >= deadline) return -EBUSY;
    const timespec pause{0, 1'000'000};
    nanosleep(&pause, nullptr);
  }
  if (rc < 0) return rc;
  struct stat st {};
  rc = os.fstat(fd, &st);
  if (rc == 0 && st.st_nlink == 0) rc = -ENOENT;
  if (rc < 0) (void)os.flock(fd, LOCK_UN);
  return rc;
}

}  // namespace hugepin
