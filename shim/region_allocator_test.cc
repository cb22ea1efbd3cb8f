#include "shim/region_allocator.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <thread>
#include <vector>

#include "base/size.h"

namespace hugepin {

TEST_CASE("extents are page-aligned, first-fit and rounded up to the page") {
  RegionAllocator region(16 * kMiB, 2 * kMiB);
  std::optional<Extent> a = region.allocate(1);
  std::optional<Extent> b = region.allocate(2 * kMiB + 1);
  std::optional<Extent> c = region.allocate(2 * kMiB);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(c);
  CHECK(a->offset == 0);
  CHECK(a->length == 2 * kMiB);
  CHECK(b->offset == 2 * kMiB);
  CHECK(b->length == 4 * kMiB);
  CHECK(c->offset == 6 * kMiB);
  CHECK(region.free_bytes() == 8 * kMiB);
  CHECK(region.live_extents() == 3);

  // The hole left by `a` is the first fit for a small request, not for a larger one.
  CHECK(region.release(a->offset));
  CHECK(region.allocate(4 * kMiB)->offset == 8 * kMiB);
  CHECK(region.allocate(kMiB)->offset == 0);
}

TEST_CASE("zero bytes and requests larger than any free piece are refused") {
  RegionAllocator region(8 * kMiB, 2 * kMiB);
  CHECK_FALSE(region.allocate(0));
  CHECK_FALSE(region.allocate(8 * kMiB + 1));
  CHECK_FALSE(region.allocate(UINT64_MAX));
  std::optional<Extent> first = region.allocate(2 * kMiB);
  std::optional<Extent> second = region.allocate(2 * kMiB);
  std::optional<Extent> third = region.allocate(2 * kMiB);
  REQUIRE(third);
  CHECK(region.release(second->offset));
  // 4 MiB are free, in two pieces of 2 MiB: none holds 4 MiB (exhaustion by fragmentation).
  CHECK(region.free_bytes() == 4 * kMiB);
  CHECK(region.free_pieces() == 2);
  CHECK(region.largest_free() == 2 * kMiB);
  CHECK_FALSE(region.allocate(4 * kMiB));
  CHECK(region.allocate(2 * kMiB));
  CHECK(region.allocate(2 * kMiB));
  CHECK_FALSE(region.allocate(1));  // exhausted
  CHECK(region.free_bytes() == 0);
  CHECK(first->offset == 0);
}

TEST_CASE("freed extents coalesce with both neighbours") {
  RegionAllocator region(10 * 4096, 4096);
  std::vector<Extent> extents;
  for (int i = 0; i < 5; ++i) extents.push_back(*region.allocate(2 * 4096));
  CHECK(region.free_pieces() == 0);
  CHECK(region.release(extents[1].offset));
  CHECK(region.release(extents[3].offset));
  CHECK(region.free_pieces() == 2);
  CHECK(region.release(extents[2].offset));  // joins 1 and 3
  CHECK(region.free_pieces() == 1);
  CHECK(region.largest_free() == 6 * 4096);
  CHECK(region.release(extents[0].offset));
  CHECK(region.release(extents[4].offset));
  CHECK(region.free_pieces() == 1);
  CHECK(region.free_bytes() == region.size());
  CHECK(region.allocate(10 * 4096)->offset == 0);
}

TEST_CASE("a foreign offset or a second release changes nothing") {
  RegionAllocator region(8 * 4096, 4096);
  Extent a = *region.allocate(4096);
  Extent b = *region.allocate(2 * 4096);
  CHECK_FALSE(region.release(b.offset + 4096));  // inside an extent, not its start
  CHECK_FALSE(region.release(7 * 4096));         // free space
  CHECK(region.release(a.offset));
  CHECK_FALSE(region.release(a.offset));  // second release
  CHECK(region.live_extents() == 1);
  CHECK(region.free_bytes() == 6 * 4096);
}

TEST_CASE("a bad alignment is refused") {
  CHECK_THROWS(RegionAllocator(3 * 4096, 3000));
  CHECK_THROWS(RegionAllocator(4096 + 1, 4096));
  CHECK_THROWS(RegionAllocator(4096, 0));
  RegionAllocator empty(0, 4096);
  CHECK_FALSE(empty.allocate(1));
}

TEST_CASE("threads allocating and releasing at once never get overlapping extents") {
  constexpr uint64_t kPage = 4096;
  RegionAllocator region(4096 * kPage, kPage);
  constexpr int kThreads = 4;
  std::vector<std::vector<Extent>> kept(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 random(1234 + t);
      std::vector<Extent> mine;
      for (int i = 0; i < 2000; ++i) {
        if (!mine.empty() && random() % 3 == 0) {
          size_t pick = random() % mine.size();
          CHECK(region.release(mine[pick].offset));
          mine.erase(mine.begin() + static_cast<long>(pick));
        } else if (auto extent = region.allocate(1 + random() % (8 * kPage))) {
          mine.push_back(*extent);
        }
      }
      kept[t] = mine;
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<Extent> all;
  for (const auto& mine : kept) all.insert(all.end(), mine.begin(), mine.end());
  std::sort(all.begin(), all.end(), [](const Extent& a, const Extent& b) { return a.offset < b.offset; });
  uint64_t live_bytes = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    CHECK(all[i].offset % kPage == 0);
    CHECK(all[i].length % kPage == 0);
    if (i > 0) CHECK(all[i - 1].offset + all[i - 1].length <= all[i].offset);
    live_bytes += all[i].length;
  }
  CHECK(region.live_extents() == all.size());
  CHECK(region.free_bytes() + live_bytes == region.size());
}

}  // namespace hugepin
