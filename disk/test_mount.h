// For the disk tests on file systems mounted for the test (spill_mount_test.cc,
// spill_mount_uring_test.cc): a tmpfs or ramfs on a fresh directory, and whether this process
// may mount at all.
#pragma once

#include <doctest/doctest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <string>

#include "tests/support/gate.h"
#include "tests/support/temp_dir.h"

namespace hugepin::test {

// A file system mounted on a fresh directory for one test; unmounted when done.
class Mount {
 public:
  Mount(const std::string& type, const std::string& options) {
    if (::mount(type.c_str(), dir_.path().c_str(), type.c_str(), 0, options.c_str()) != 0) {
      FAIL("cannot mount ", type, " on ", dir_.path());
    }
  }
  ~Mount() { ::umount(dir_.path().c_str()); }
  const std::string& path() const { return dir_.path(); }

 private:
  TempDir dir_{"/tmp"};
};

// "mount": what mounting needs when this process may not mount (root with CAP_SYS_ADMIN, outside a
// locked-down container); "" when it may.
inline std::string missing_mount() {
  const std::string needs = "root allowed to mount (tmpfs and ramfs)";
  if (pretend_missing("mount")) return pretended("mount", needs);
  if (geteuid() != 0) return needs;
  TempDir dir("/tmp");
  if (::mount("tmpfs", dir.path().c_str(), "tmpfs", 0, "size=1m") != 0) return needs;
  ::umount(dir.path().c_str());
  return "";
}

}  // namespace hugepin::test
