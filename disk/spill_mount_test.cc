// The disk tier on file systems mounted for the test (root): a small tmpfs that fills up (a
// snapshot save that cannot fit), and a ramfs, which has no O_DIRECT (the natural fallback to the
// thread pool). Skips (77) where this process may not mount. ENOSPC from io_uring mid-write:
// spill_mount_uring_test.cc.
#include <doctest/doctest.h>
#include <filesystem>
#include <set>

#include "base/error.h"
#include "base/pattern.h"
#include "base/size.h"
#include "disk/snapshot.h"
#include "disk/spill.h"
#include "disk/test_mount.h"
#include "disk/test_snapshot.h"
#include "hugemem/arena.h"
#include "tests/support/error_text.h"
#include "tests/support/gate.h"
#include "tests/support/temp_dir.h"

namespace hugepin {
namespace {

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

using test::contains;
using test::Mount;
using test::TestArena;

}  // namespace

TEST_CASE("a full file system: the save fails clearly, the previous snapshot stays whole, nothing is left over") {
  TestArena arena("hp-spill-full", {3 * kMiB, 3 * kMiB});
  Mount tmpfs("tmpfs", "size=10m,mode=0700");
  const std::string dir = tmpfs.path() + "/snapshot";
  arena.fill(1);
  save_snapshot(real_os(), "hp-spill-full", dir, arena.snapshot_options(512 * kKiB));  // 6 MiB of 10
  arena.fill(2);
  try {
    save_snapshot(real_os(), "hp-spill-full", dir, arena.snapshot_options(512 * kKiB));  // needs 6 more
    FAIL("a save into a full file system succeeded");
  } catch (const Error& error) {
    CHECK(error.errno_value() == ENOSPC);
    CHECK(contains(error.what(), "cannot save rank 1 of arena 'hp-spill-full': cannot allocate 3.00 MiB for spill file " +
                                     dir + "/.tmp-"));
    CHECK(contains(error.what(), "No space left on device (ENOSPC 28)"));
  }
  CHECK(names_in(dir) == std::set<std::string>{".lock", "data-1", "manifest.json"});
  arena.fill(3);
  load_snapshot(real_os(), "hp-spill-full", dir, arena.snapshot_options(512 * kKiB));
  CHECK(arena.holds(1));
}

TEST_CASE("ramfs has no O_DIRECT: spill and snapshots fall back to a buffered thread pool") {
  TestArena arena("hp-spill-ramfs", {2 * kMiB, 2 * kMiB});
  Mount ramfs("ramfs", "mode=0700");
  arena.fill(4);
  {
    SpillFile file = SpillFile::open(real_os(), ramfs.path() + "/rank-0.spill",
                                     {arena.regions[0].data(), arena.regions[0].size()}, {});
    CHECK_FALSE(file.backend().uring);
    CHECK_FALSE(file.backend().direct);
    CHECK(contains(file.backend().fallback, "does not support O_DIRECT (open: EINVAL)"));
    REQUIRE(file.spill({0}).wait().ok());
  }
  SnapshotReport saved = save_snapshot(real_os(), "hp-spill-ramfs", ramfs.path(), arena.snapshot_options(512 * kKiB));
  CHECK(contains(saved.backend, "buffered"));
  CHECK(contains(saved.fallback, "does not support O_DIRECT"));
  arena.fill(5);
  load_snapshot(real_os(), "hp-spill-ramfs", ramfs.path(), arena.snapshot_options(512 * kKiB));
  CHECK(arena.holds(4));
}

}  // namespace hugepin

int main(int argc, char** argv) { return hugepin::test::run_or_skip(argc, argv, hugepin::test::missing_mount()); }
