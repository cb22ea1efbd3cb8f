#include "base/file_locks.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "tests/support/child_process.h"
#include "tests/support/fault_os.h"

namespace hugepin {

TEST_CASE("a file locked for use is seen as locked, by this process and by another, without a lock taken") {
  char path[] = "/dev/shm/hugepin-lock-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  CHECK_FALSE(file_is_locked(real_os(), path));
  REQUIRE(lock_file_for_use(real_os(), fd) == 0);
  CHECK(file_is_locked(real_os(), path));
  // Asking took no lock: a second open file description still cannot take one, and can after the
  // holder closes.
  const int other = open(path, O_RDWR | O_CLOEXEC);
  REQUIRE(other >= 0);
  const int refused = lock_file_for_use(real_os(), other);
  CHECK((refused == -EAGAIN || refused == -EACCES));
  CHECK(test::run_in_child([&] { return file_is_locked(real_os(), path); }) == 0);
  close(fd);
  CHECK_FALSE(file_is_locked(real_os(), path));
  CHECK(lock_file_for_use(real_os(), other) == 0);
  close(other);
  unlink(path);
  CHECK_FALSE(file_is_locked(real_os(), path));  // no file: not in use
}

// Every open fails with one errno.
class RefusingOpenOs final : public test::ForwardingOs {
 public:
  RefusingOpenOs(Os& target, int error) : ForwardingOs(target), error_(error) {}
  int open(const std::string&, int, mode_t) override { return -error_; }

 private:
  int error_;
};

TEST_CASE("a file that cannot be asked counts as in use; nothing, or nothing mappable, does not") {
  for (int error : {EACCES, EMFILE, ENOMEM}) {
    RefusingOpenOs os(real_os(), error);
    CHECK_MESSAGE(file_is_locked(os, "/dev/shm/anything"), error);
  }
  for (int error : {ENOENT, ELOOP, ENXIO, ENOTDIR, EISDIR}) {
    RefusingOpenOs os(real_os(), error);
    CHECK_FALSE_MESSAGE(file_is_locked(os, "/dev/shm/anything"), error);
  }
}

}  // namespace hugepin
