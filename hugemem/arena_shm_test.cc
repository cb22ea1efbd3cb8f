// Arenas on 4 KiB shared memory (the fallback), on this machine's real kernel: regions shared
// between processes, listing, destroying, and every failure leaving nothing behind.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "base/error.h"
#include "base/pattern.h"
#include "base/size.h"
#include "hugemem/arena.h"
#include "tests/support/child_process.h"
#include "tests/support/fault_os.h"
#include "tests/support/temp_dir.h"

namespace hugepin {
namespace {

// Options that keep every file of a test inside its own directory under /dev/shm.
ArenaOptions shm_options(const test::TempDir& dir) {
  ArenaOptions options;
  options.page_size = 4 * kKiB;
  options.shm_dir = dir.path();
  options.prefault_threads = 2;
  return options;
}

bool tree_is_empty(const std::string& dir) {
  std::string data = dir + "/hugepin";
  return !std::filesystem::exists(data) || std::filesystem::is_empty(data);
}

}  // namespace

TEST_CASE("an arena is created exactly, verified, and listed") {
  test::TempDir dir("/dev/shm");
  ArenaOptions options = shm_options(dir);
  ArenaReport report = create_arena(real_os(), "alpha", {{0, 10 * kMiB + 1, -1}, {1, 3 * kMiB, 0}}, options);
  REQUIRE(report.regions.size() == 2);
  const RegionReport& first = report.regions[0];
  CHECK(first.bytes_requested == 10 * kMiB + 1);
  CHECK(first.bytes == 10 * kMiB + 4 * kKiB);  // rounded up to the page only
  CHECK(first.placement.page_size == 4 * kKiB);
  CHECK(first.placement.pages_total == first.bytes / (4 * kKiB));
  CHECK(first.placement.pages_checked == first.placement.pages_total);
  CHECK(first.placement.pages_per_node.count(-1) == 0);  // every page resident: prefaulted
  CHECK(report.regions[1].placement.all_on(0));
  CHECK(first.prefault_threads == 2);
  CHECK(first.path == dir.path() + "/hugepin/alpha/rank-0");

  struct stat st {};
  REQUIRE(stat(first.path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(static_cast<uint64_t>(st.st_size) == first.bytes);

  std::vector<ArenaListing> listings = list_arenas(real_os(), options);
  REQUIRE(listings.size() == 1);
  CHECK(listings[0].name == "alpha");
  REQUIRE(listings[0].regions.size() == 2);
  CHECK(listings[0].regions[1].bytes == 3 * kMiB);
  CHECK(listings[0].regions[1].page_size == 4 * kKiB);

  CHECK(destroy_arena(real_os(), "alpha", options) == 2);
  CHECK(tree_is_empty(dir.path()));
  CHECK(list_arenas(real_os(), options).empty());
}

TEST_CASE("data written by one process is read back by another") {
  test::TempDir dir("/dev/shm");
  ArenaOptions options = shm_options(dir);
  create_arena(real_os(), "shared", {{0, 4 * kMiB, -1}, {1, 4 * kMiB, -1}}, options);
  REQUIRE(test::run_in_child([&] {
            MappedRegion region = open_region(real_os(), "shared", 1, true, options);
            fill_pattern(region.data(), region.size(), 99);
            return true;
          }) == 0);
  MappedRegion region = open_region(real_os(), "shared", 1, false, options);
  CHECK(region.size() == 4 * kMiB);
  CHECK_FALSE(find_pattern_mismatch(region.data(), region.size(), 99));
  // The other rank's region is untouched (zero).
  MappedRegion other = open_region(real_os(), "shared", 0, false, options);
  CHECK(find_pattern_mismatch(other.data(), other.size(), 99) == size_t{0});
  destroy_arena(real_os(), "shared", options);
}

TEST_CASE("bad requests are refused with the value named, changing nothing") {
  test::TempDir dir("/dev/shm");
  ArenaOptions options = shm_options(dir);
  CHECK_THROWS_WITH_AS(create_arena(real_os(), "a/b", {{0, kMiB, -1}}, options),
                       doctest::Contains("invalid arena name 'a/b'"), Error);
  CHECK_THROWS_WITH_AS(create_arena(real_os(), "z", {{0, 0, -1}}, options), "rank 0 asks for a region of size 0", Error);
  CHECK_THROWS_WITH_AS(create_arena(real_os(), "z", {{0, kMiB, -1}, {0, kMiB, -1}}, options), "rank 0 is given twice",
                       Error);
  CHECK_THROWS_WITH_AS(create_arena(real_os(), "z", {{0, kMiB, 7}}, options),
                       doctest::Contains("rank 0 asks for NUMA node 7, which this machine does not have"), Error);
  CHECK_THROWS_WITH_AS(create_arena(real_os(), "z", {{0, 64 * kTiB, -1}}, options),
                       doctest::Contains("more than the 16.00 TiB a region may have"), Error);
  CHECK_THROWS_WITH_AS(split_evenly(3, 4), "size 3 bytes cannot be split over 4 ranks", Error);
  CHECK(tree_is_empty(dir.path()));
}

TEST_CASE("an existing arena is not overwritten") {
  test::TempDir dir("/dev/shm");
  ArenaOptions options = shm_options(dir);
  create_arena(real_os(), "taken", {{0, kMiB, -1}}, options);
  CHECK_THROWS_WITH_AS(create_arena(real_os(), "taken", {{0, kMiB, -1}}, options),
                       doctest::Contains("arena 'taken' already exists"), Error);
  CHECK(list_arenas(real_os(), options).size() == 1);
  destroy_arena(real_os(), "taken", options);
}

TEST_CASE("destroying an unknown arena is an error") {
  test::TempDir dir("/dev/shm");
  CHECK_THROWS_WITH_AS(destroy_arena(real_os(), "nothing-here", shm_options(dir)),
                       "no arena named 'nothing-here' (hugepin arena list shows the arenas)", Error);
  CHECK_THROWS_WITH_AS(open_region(real_os(), "nothing-here", 0, false, shm_options(dir)),
                       doctest::Contains("arena 'nothing-here' has no region for rank 0"), Error);
}

TEST_CASE("a failure at any step removes everything created so far") {
  // Each fault hits the second region, after the first one was fully made.
  struct Case {
    const char* op;
    int error_value;
    int skip;
    const char* expect;
  };
  const Case cases[] = {
      {"create", EACCES, 1, "cannot open region file"},
      {"ftruncate", ENOSPC, 1, "cannot size to"},
      {"mmap", ENOMEM, 1, "cannot map"},
      {"madvise", ENOMEM, 2, "cannot fault in"},
      {"query_page_nodes", EPERM, 1, "cannot query the NUMA node"},
      {"mbind", EINVAL, 1, "cannot bind"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.op);
    test::TempDir dir("/dev/shm");
    ArenaOptions options = shm_options(dir);
    test::FaultInjectionOs os(real_os());
    os.fail(c.op, c.error_value, c.skip);
    CHECK_THROWS_WITH_AS(create_arena(os, "broken", {{0, kMiB, 0}, {1, kMiB, 0}}, options),
                         doctest::Contains(c.expect), Error);
    CHECK(list_arenas(real_os(), options).empty());
    CHECK(tree_is_empty(dir.path()));
  }
}

TEST_CASE("a crash mid-creation leaves files that list and destroy find") {
  test::TempDir dir("/dev/shm");
  ArenaOptions options = shm_options(dir);
  REQUIRE(test::run_in_child([&] {
            // Creates the arena's directory and one region file by hand, then dies: what a crash
            // between two regions leaves.
            std::filesystem::create_directories(dir.path() + "/hugepin/crashed");
            FILE* file = std::fopen((dir.path() + "/hugepin/crashed/rank-0").c_str(), "w");
            if (file != nullptr) std::fclose(file);
            return true;
          }) == 0);
  std::vector<ArenaListing> listings = list_arenas(real_os(), options);
  REQUIRE(listings.size() == 1);
  CHECK(listings[0].name == "crashed");
  CHECK(destroy_arena(real_os(), "crashed", options) == 1);
  CHECK(tree_is_empty(dir.path()));
}

TEST_CASE("a group makes files 0660") {
  test::TempDir dir("/dev/shm");
  ArenaOptions options = shm_options(dir);
  options.group = getegid();
  ArenaReport report = create_arena(real_os(), "grouped", {{0, kMiB, -1}}, options);
  struct stat st {};
  REQUIRE(stat(report.regions[0].path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0660);
  CHECK(st.st_gid == getegid());
  destroy_arena(real_os(), "grouped", options);
}

}  // namespace hugepin
