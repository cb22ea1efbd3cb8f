// A snapshot written by the thread pool and read back through io_uring. In disk_uring_test: skips
// (77) without io_uring, O_DIRECT or 16 MiB of lockable memory.
#include <doctest/doctest.h>

#include "base/size.h"
#include "disk/snapshot.h"
#include "disk/test_disk.h"
#include "disk/test_snapshot.h"
#include "tests/support/error_text.h"
#include "tests/support/temp_dir.h"

namespace hugepin {

using test::contains;
using test::TestArena;

TEST_CASE("the thread-pool path saves and loads the same snapshot") {
  TestArena arena("hp-spill-pool", {2 * kMiB + 4 * kKiB, 2 * kMiB});
  test::TempDir disk(test::kDiskDir);
  arena.fill(5);
  SnapshotOptions options = arena.snapshot_options();
  options.io.io = SpillIo::kThreads;
  SnapshotReport saved = save_snapshot(real_os(), "hp-spill-pool", disk.path(), options);
  CHECK(contains(saved.backend, "pread/pwrite"));
  arena.fill(6);
  options.io.io = SpillIo::kUring;  // written by one path, read by the other
  load_snapshot(real_os(), "hp-spill-pool", disk.path(), options);
  CHECK(arena.holds(5));
}

}  // namespace hugepin
