#include "base/file_locks.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <string>

namespace hugepin {

TEST_CASE("locked files are read from /proc/locks: holders only, every lock kind, bad lines skipped") {
  const std::set<FileKey> files = parse_locked_files(
      "1: FLOCK  ADVISORY  WRITE 18417 00:1b:65210 0 EOF\n"
      "1: -> FLOCK  ADVISORY  WRITE 18420 00:1b:777 0 EOF\n"  // a waiter: not a holder
      "2: POSIX  ADVISORY  READ 901 fd:01:42 0 EOF\n"
      "3: OFDLCK ADVISORY  WRITE -1 103:2:9 0 EOF\n"
      "4: FLOCK  ADVISORY  WRITE 5 zz:1b:1 0 EOF\n"  // not hex
      "5: FLOCK  ADVISORY  WRITE 5 00:1b: 0 EOF\n"   // no inode
      "6: FLOCK\n"
      "\n");
  CHECK(files == std::set<FileKey>{{makedev(0, 0x1b), 65210}, {makedev(0xfd, 1), 42}, {makedev(0x103, 2), 9}});
}

TEST_CASE("a file flocked by this process is found in this machine's /proc/locks, and gone once unlocked") {
  char path[] = "/dev/shm/hugepin-lock-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  struct stat st {};
  REQUIRE(fstat(fd, &st) == 0);
  const FileKey key{st.st_dev, st.st_ino};
  REQUIRE(flock(fd, LOCK_EX) == 0);
  std::optional<std::set<FileKey>> held = locked_files(real_os());
  REQUIRE(held.has_value());
  CHECK(held->count(key) == 1);
  REQUIRE(flock(fd, LOCK_UN) == 0);
  CHECK(locked_files(real_os())->count(key) == 0);
  close(fd);
  unlink(path);
}

}  // namespace hugepin
