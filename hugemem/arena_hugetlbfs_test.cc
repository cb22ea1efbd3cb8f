// Arenas on real hugetlbfs. Needs root: borrows 2 MiB pages from the kernel for the run, mounts a
// private hugetlbfs, and gives both back. Skips (77) when the machine cannot lend them.
#include <doctest/doctest.h>
#include <unistd.h>

#include "base/error.h"
#include "base/pattern.h"
#include "base/size.h"
#include "hugemem/arena.h"
#include "tests/support/child_process.h"
#include "tests/support/gate.h"
#include "tests/support/temp_dir.h"

namespace hugepin {
namespace {

constexpr uint64_t kPages = 48;
test::BorrowedHugepages* g_pool = nullptr;

ArenaOptions hugetlbfs_options(const test::TempDir& shm) {
  ArenaOptions options;
  options.hugetlbfs_dir = g_pool->mount_dir();
  options.shm_dir = shm.path();
  options.prefault_threads = 2;
  return options;
}

}  // namespace

TEST_CASE("a hugetlbfs arena takes exactly its pages and gives them back") {
  test::TempDir shm("/dev/shm");
  ArenaOptions options = hugetlbfs_options(shm);
  options.page_size = 2 * kMiB;
  options.strict = true;
  uint64_t free_before = g_pool->free_pages();
  ArenaReport report = create_arena(real_os(), "huge", {{0, 20 * kMiB, 0}, {1, 9 * kMiB, -1}}, options);
  // 10 + 5 pages: the second region is rounded up to the page.
  CHECK(g_pool->free_pages() == free_before - 15);
  REQUIRE(report.regions.size() == 2);
  CHECK(report.regions[0].placement.page_size == 2 * kMiB);
  CHECK(report.regions[0].placement.pages_total == 10);
  CHECK(report.regions[0].placement.all_on(0));
  CHECK(report.regions[1].bytes == 10 * kMiB);
  CHECK(report.regions[0].path == g_pool->mount_dir() + "/hugepin/huge/rank-0");

  CHECK(test::run_in_child([&] {
          MappedRegion region = open_region(real_os(), "huge", 0, true, options);
          fill_pattern(region.data(), region.size(), 5);
          return region.page_size() == 2 * kMiB;
        }) == 0);
  MappedRegion region = open_region(real_os(), "huge", 0, false, options);
  CHECK_FALSE(find_pattern_mismatch(region.data(), region.size(), 5));
  region = MappedRegion();
  // Mapping again took no new pages: they live in the file.
  CHECK(g_pool->free_pages() == free_before - 15);

  CHECK(destroy_arena(real_os(), "huge", options) == 2);
  CHECK(g_pool->free_pages() == free_before);
}

TEST_CASE("auto uses hugepages when the pool has them") {
  test::TempDir shm("/dev/shm");
  ArenaOptions options = hugetlbfs_options(shm);
  ArenaReport report = create_arena(real_os(), "auto", {{0, 8 * kMiB, -1}}, options);
  CHECK(report.regions[0].placement.page_size == 2 * kMiB);
  CHECK(report.regions[0].fallback.empty());
  destroy_arena(real_os(), "auto", options);
}

TEST_CASE("more than the pool: 4 KiB with a reason, or an error when strict") {
  test::TempDir shm("/dev/shm");
  ArenaOptions options = hugetlbfs_options(shm);
  options.page_size = 2 * kMiB;
  uint64_t too_many = (g_pool->free_pages() + 1) * 2 * kMiB;
  ArenaReport report = create_arena(real_os(), "spill", {{0, too_many, 0}}, options);
  CHECK(report.regions[0].placement.page_size == 4 * kKiB);
  CHECK(report.regions[0].fallback.find("falls back to 4 KiB shared memory") != std::string::npos);
  CHECK(report.regions[0].fallback.find("hugepin pool set") != std::string::npos);
  destroy_arena(real_os(), "spill", options);

  options.strict = true;
  uint64_t free_before = g_pool->free_pages();
  CHECK_THROWS_WITH_AS(create_arena(real_os(), "spill", {{0, too_many, 0}}, options),
                       doctest::Contains("strict: rank 0 falls back"), Error);
  CHECK(g_pool->free_pages() == free_before);
  CHECK(list_arenas(real_os(), options).empty());
}

}  // namespace hugepin

int main(int argc, char** argv) {
  std::string why_not;
  auto pool = hugepin::test::BorrowedHugepages::borrow(hugepin::kPages, 2 * hugepin::kMiB, &why_not);
  hugepin::g_pool = pool.get();
  return hugepin::test::run_or_skip(argc, argv, why_not);
}
