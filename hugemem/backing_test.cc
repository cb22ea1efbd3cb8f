// The fallback chain 1G -> 2M -> 4K, decided from recorded pools.
#include "hugemem/backing.h"

#include <doctest/doctest.h>

#include "base/error.h"
#include "base/size.h"
#include "tests/support/temp_dir.h"

namespace hugepin {
namespace {

PoolState pool_of(const std::string& name) {
  auto os = make_rooted_os(test::test_data_path("sysfs/" + name));
  return read_pool(*os);
}

}  // namespace

TEST_CASE("auto takes the largest page size the node can serve") {
  PoolState pool = pool_of("two-node");
  PagesTaken taken;
  // Node 0 has 4 free 1 GiB pages.
  BackingChoice choice = choose_backing(pool, {0, 3 * kGiB, 0}, {}, taken);
  CHECK(choice.page_size == kGiB);
  CHECK(choice.root_dir == "/dev/hugepages1G");
  CHECK(choice.fallback.empty());
  // Node 1 has no 1 GiB pages: 2 MiB, and that is a fallback worth saying.
  BackingChoice second = choose_backing(pool, {1, kGiB, 1}, {}, taken);
  CHECK(second.page_size == 2 * kMiB);
  CHECK(second.root_dir == "/dev/hugepages");
  CHECK(second.fallback.find("rank 1 uses 2M pages: 1 1G pages needed on node 1, 0 free") == 0);
}

TEST_CASE("earlier regions use up the pool for later ones") {
  PoolState pool = pool_of("two-node");
  PagesTaken taken;
  ArenaOptions options;
  options.page_size = 2 * kMiB;
  CHECK(choose_backing(pool, {0, 900 * 2 * kMiB, 0}, options, taken).page_size == 2 * kMiB);
  // 100 of node 0's 1000 free pages are left, and 10 are reserved system-wide.
  BackingChoice next = choose_backing(pool, {1, 200 * 2 * kMiB, 0}, options, taken);
  CHECK(next.page_size == 4 * kKiB);
  CHECK(next.root_dir == "/dev/shm");
  CHECK(next.fallback.find("200 2M pages needed on node 0, 100 free") != std::string::npos);
  CHECK(next.fallback.find("hugepin pool set 2248M --node 0 --pagesize 2M") != std::string::npos);
}

TEST_CASE("strict turns every fallback into an error") {
  PoolState pool = pool_of("two-node");
  PagesTaken taken;
  ArenaOptions options;
  options.strict = true;
  CHECK_THROWS_WITH_AS(choose_backing(pool, {0, kGiB, 1}, options, taken),
                       doctest::Contains("strict: rank 0 uses 2M pages"), Error);
  options.page_size = 2 * kMiB;
  CHECK_THROWS_WITH_AS(choose_backing(pool, {0, 2 * kTiB, 1}, options, taken),
                       doctest::Contains("strict: rank 0 falls back to 4 KiB shared memory"), Error);
}

TEST_CASE("no pool at all: 4 KiB with the command that would make one") {
  PoolState pool = pool_of("one-node");
  PagesTaken taken;
  BackingChoice choice = choose_backing(pool, {2, 64 * kMiB, -1}, {}, taken);
  CHECK(choice.page_size == 4 * kKiB);
  CHECK(choice.fallback == "rank 2 falls back to 4 KiB shared memory: no hugepages are reserved "
                           "(hugepin pool set 64M --pagesize 2M)");
}

TEST_CASE("a page size without a mount falls back and names the mount command") {
  PoolState pool = pool_of("two-node");
  pool.mounts.clear();
  PagesTaken taken;
  ArenaOptions options;
  options.page_size = 2 * kMiB;
  BackingChoice choice = choose_backing(pool, {0, 4 * kMiB, 0}, options, taken);
  CHECK(choice.page_size == 4 * kKiB);
  CHECK(choice.fallback.find("no hugetlbfs mount for 2M pages (hugepin pool mount --pagesize 2M)") != std::string::npos);
}

TEST_CASE("explicit 4K is no fallback; an unsupported size is an error") {
  PoolState pool = pool_of("two-node");
  PagesTaken taken;
  ArenaOptions options;
  options.page_size = 4 * kKiB;
  options.strict = true;
  BackingChoice choice = choose_backing(pool, {0, kMiB, 0}, options, taken);
  CHECK(choice.page_size == 4 * kKiB);
  CHECK(choice.fallback.empty());
  options.page_size = 16 * kMiB;
  CHECK_THROWS_AS(choose_backing(pool, {0, kMiB, 0}, options, taken), Error);
}

}  // namespace hugepin
