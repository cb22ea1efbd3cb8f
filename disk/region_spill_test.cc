// A region's segments spilled to one file each and restored, through RegionSpill: one completion
// per job over all the files, the first failure's errno, and the cleanup of what is left behind.
#include "disk/region_spill.h"

#include <doctest/doctest.h>

#include <cerrno>
#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "base/error.h"
#include "base/pattern.h"
#include "base/size.h"
#include "disk/test_disk.h"
#include "hugemem/arena.h"
#include "tests/support/temp_dir.h"

namespace hugepin {
namespace {

// Waits for one job's completion and keeps its error.
struct Done {
  std::mutex mutex;
  std::condition_variable finished;
  int calls = 0;
  int error = -1;
  std::function<void(int)> callback() {
    return [this](int e) {
      std::lock_guard lock(mutex);
      ++calls;
      error = e;
      finished.notify_all();
    };
  }
  int wait() {
    std::unique_lock lock(mutex);
    finished.wait(lock, [this] { return calls > 0; });
    return error;
  }
};

TEST_CASE("two segments spill to two files and come back, one completion per job") {
  test::TempDir shm{"/dev/shm"};
  test::TempDir disk{test::kDiskDir};
  ArenaOptions arena;
  arena.page_size = 4 * kKiB;
  arena.shm_dir = shm.path();
  create_arena(real_os(), "hp-region-spill", {{0, 24 * 64 * kKiB, -1}}, arena);
  MappedRegion region = open_region(real_os(), "hp-region-spill", 0, true, arena);
  // Segment 0: 8 chunks of 64 KiB; segment 1: 8 chunks of 128 KiB, right after it.
  std::span<std::byte> first(region.data(), 8 * 64 * kKiB);
  std::span<std::byte> second(region.data() + first.size(), 8 * 128 * kKiB);
  const std::string prefix = disk.path() + "/rank-0";
  {
    RegionSpill spill(real_os(), prefix, {{first, 64 * kKiB}, {second, 128 * kKiB}});
    CHECK(std::filesystem::exists(prefix + ".seg0.spill"));
    CHECK(std::filesystem::exists(prefix + ".seg1.spill"));
    fill_pattern(first.data(), first.size(), 1);
    fill_pattern(second.data(), second.size(), 2);
    Done spilled;
    spill.submit(SpillOp::kSpill, {1, 6}, spilled.callback());
    CHECK(spilled.wait() == 0);
    std::fill(first.begin(), first.end(), std::byte{0});
    std::fill(second.begin(), second.end(), std::byte{0});
    Done restored;
    spill.submit(SpillOp::kRestore, {6, 1}, restored.callback());
    CHECK(restored.wait() == 0);
    CHECK(restored.calls == 1);
    CHECK_FALSE(find_pattern_mismatch(first.data() + 1 * 64 * kKiB, 64 * kKiB, 1, 64 * kKiB / 8));
    CHECK_FALSE(find_pattern_mismatch(second.data() + 6 * 128 * kKiB, 128 * kKiB, 2, 6 * 128 * kKiB / 8));
    CHECK(first[0] == std::byte{0});  // chunk 0 was not restored

    // A chunk beyond the segments is refused before anything is queued on any file.
    CHECK_THROWS_WITH_AS(spill.submit(SpillOp::kRestore, {0, 8}, Done().callback()),
                         doctest::Contains("chunk 8 is out of range"), Error);
    CHECK_THROWS_WITH_AS(spill.submit(SpillOp::kSpill, {2, 2}, Done().callback()), "chunk 2 is given twice", Error);
  }
  RegionSpill::remove_files(prefix);
  CHECK_FALSE(std::filesystem::exists(prefix + ".seg0.spill"));
  CHECK_FALSE(std::filesystem::exists(prefix + ".seg1.spill"));
  destroy_arena(real_os(), "hp-region-spill", arena);
}

}  // namespace
}  // namespace hugepin
