// For the disk tier's tests: what this machine offers, so that a test of io_uring, O_DIRECT or
// fixed buffers is skipped (and says so) where the machine has none, as in a container whose
// seccomp profile refuses io_uring or as a user with a small RLIMIT_MEMLOCK.
#pragma once

#include <fcntl.h>
#include <liburing.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace hugepin::test {

// The directory on this machine's disk that the tests write to.
inline const std::string kDiskDir = "/var/tmp";

inline bool io_uring_available() {
  static const bool available = [] {
    io_uring ring{};
    if (io_uring_queue_init(2, &ring, 0) != 0) return false;
    io_uring_queue_exit(&ring);
    return true;
  }();
  return available;
}

// True when files in `dir` open with O_DIRECT.
inline bool direct_io_in(const std::string& dir) {
  std::string path = dir + "/hugepin-direct-probe-" + std::to_string(getpid());
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
  ::unlink(path.c_str());
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

inline bool disk_direct_io() {
  static const bool available = direct_io_in(kDiskDir);
  return available;
}

// True when `bytes` can be registered as io_uring fixed buffers: root (CAP_IPC_LOCK) or a
// RLIMIT_MEMLOCK that large.
inline bool can_lock_memory(uint64_t bytes) {
  rlimit limit{};
  if (geteuid() == 0) return true;
  return getrlimit(RLIMIT_MEMLOCK, &limit) == 0 && (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= bytes);
}

}  // namespace hugepin::test
