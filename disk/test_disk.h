// For the disk tier's tests: what this machine offers. The cases that need io_uring, O_DIRECT or
// fixed buffers live in gated binaries (disk_direct_test, disk_uring_test, disk_mount_uring_test)
// that skip, saying so, where the machine has none, as in a container whose seccomp profile
// refuses io_uring or as a user with a small RLIMIT_MEMLOCK. Each missing_* function returns what
// its prerequisite needs, in words, when it is missing ("" when not), and honours
// HUGEPIN_TEST_MISSING (tests/support/gate.h) under the name in its comment.
#pragma once

#include <fcntl.h>
#include <liburing.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "base/size.h"
#include "tests/support/prerequisite.h"

namespace hugepin::test {

// The directory on this machine's disk that the tests write to.
inline const std::string kDiskDir = "/var/tmp";

// "io_uring".
inline std::string missing_io_uring() {
  static const std::string missing = []() -> std::string {
    if (pretend_missing("io_uring")) return pretended("io_uring", "io_uring");
    io_uring ring{};
    if (int rc = io_uring_queue_init(2, &ring, 0); rc != 0) return "io_uring (io_uring_setup: " + std::string(strerror(-rc)) + ")";
    io_uring_queue_exit(&ring);
    return "";
  }();
  return missing;
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

// "O_DIRECT": files on this machine's disk (kDiskDir) open with O_DIRECT.
inline std::string missing_direct_io() {
  static const std::string missing = []() -> std::string {
    const std::string needs = "O_DIRECT in " + kDiskDir;
    if (pretend_missing("O_DIRECT")) return pretended("O_DIRECT", needs);
    return direct_io_in(kDiskDir) ? "" : needs;
  }();
  return missing;
}

// "memlock": `bytes` can be registered as io_uring fixed buffers: root (CAP_IPC_LOCK) or a
// RLIMIT_MEMLOCK that large.
inline std::string missing_locked_memory(uint64_t bytes) {
  const std::string needs = format_bytes(bytes) + " of lockable memory (root, or RLIMIT_MEMLOCK)";
  if (pretend_missing("memlock")) return pretended("memlock", needs);
  rlimit limit{};
  if (geteuid() == 0) return "";
  const bool enough = getrlimit(RLIMIT_MEMLOCK, &limit) == 0 && (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= bytes);
  return enough ? "" : needs;
}

}  // namespace hugepin::test
