#include "ipc/arena_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <utility>

#include "base/duration.h"
#include "base/error.h"
#include "base/file_locks.h"
#include "base/trusted_file.h"

namespace hugepin {

// --- ArenaClaimLock ---

ArenaClaimLock ArenaClaimLock::take(Os& os, const ControlSegment& segment, std::string_view arena,
                                    int64_t timeout_ns) {
  const int fd = segment.fd();
  const int rc = lock_shared_while_linked(os, fd, timeout_ns);
  if (rc == -ENOENT) {
    throw Error(cat("arena '", arena, "' was destroyed while this process was claiming a role in it"), ENOENT);
  }
  if (rc == -EBUSY) {
    throw Error(cat("arena '", arena, "': control segment ", segment.path(), " has been locked exclusively for ",
                    format_duration(timeout_ns), " (hugepind holds it only for a moment while it destroys an arena; "
                    "look for another process holding a flock on it)"),
                EBUSY);
  }
  if (rc < 0) throw_errno(cat("cannot lock control segment ", segment.path(), " to claim a role in arena '", arena, "'"), -rc);
  ArenaClaimLock lock;
  lock.os_ = &os;
  lock.fd_ = fd;
  return lock;
}

ArenaClaimLock::~ArenaClaimLock() { release(); }

ArenaClaimLock::ArenaClaimLock(ArenaClaimLock&& other) noexcept
    : os_(other.os_), fd_(std::exchange(other.fd_, -1)) {}

ArenaClaimLock& ArenaClaimLock::operator=(ArenaClaimLock&& other) noexcept {
  if (this != &other) {
    release();
    os_ = other.os_;
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void ArenaClaimLock::release() noexcept {
  if (fd_ < 0) return;
  (void)os_->flock(fd_, LOCK_UN);
  fd_ = -1;
}

// --- ArenaDestroyLock ---

std::optional<ArenaDestroyLock> ArenaDestroyLock::try_take(Os& os, std::string_view arena) {
  const std::string path = control_segment_path(arena);
  ArenaDestroyLock lock;
  try {
    // Whoever destroys the arena must be able to trust its segment: no link, no FIFO to block on.
    lock.fd_ = open_trusted(os, {std::string(kControlSegmentDir), control_segment_name(arena)}, O_RDONLY,
                            {FileType::kRegular, FileOwners::kTrusted, "control segment"}).fd;
  } catch (const Error& error) {
    if (error.errno_value() == ENOENT) return std::nullopt;
    throw Error(cat("cannot lock arena '", arena, "': ", error.what()), error.errno_value());
  }
  const int fd = lock.fd_.get();
  const int rc = os.flock(fd, LOCK_EX | LOCK_NB);
  if (rc == -EWOULDBLOCK || rc == -EINTR) return std::nullopt;
  if (rc < 0) throw_errno(cat("cannot lock control segment ", path), -rc);
  // The segment opened by name may have been unlinked (and the name reused) before the lock.
  struct stat st {};
  if (int stat_rc = os.fstat(fd, &st); stat_rc < 0) throw_errno(cat("cannot stat control segment ", path), -stat_rc);
  if (st.st_nlink == 0) return std::nullopt;
  return lock;
}

}  // namespace hugepin
