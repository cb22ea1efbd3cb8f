#include "cli/engine/chunk_cache.h"

#include <doctest/doctest.h>

#include <algorithm>

namespace hugepin::cli {
namespace {

TEST_CASE("stores take free chunks and slots; loads take stored ones; completions give them back") {
  ChunkCache cache(8, 4, 1);
  CHECK_FALSE(cache.begin(CacheOp::kLoad, 1));  // nothing stored yet
  std::optional<CacheJob> store = cache.begin(CacheOp::kStore, 3);
  REQUIRE(store);
  CHECK(store->chunks == std::vector<ChunkId>{0, 1, 2});
  CHECK(store->versions == std::vector<uint64_t>{1, 2, 3});
  CHECK(store->slots.size() == 3);
  CHECK_FALSE(cache.begin(CacheOp::kStore, 2));  // one GPU slot left
  CHECK(cache.free() == 5);
  CHECK_FALSE(cache.stored_version(0));          // still storing
  cache.completed(*store);
  CHECK(cache.stored() == 3);
  CHECK(cache.stored_version(1) == 2);

  std::optional<CacheJob> load = cache.begin(CacheOp::kLoad, 2);
  REQUIRE(load);
  CHECK(load->slots.size() == 2);
  for (size_t i = 0; i < 2; ++i) CHECK(load->versions[i] == *cache.stored_version(load->chunks[i]));
  // Both loaded chunks are busy: eviction takes only the idle one.
  const std::vector<ChunkId> evicted = cache.evict(6);
  REQUIRE(evicted.size() == 1);
  CHECK(std::find(load->chunks.begin(), load->chunks.end(), evicted[0]) == load->chunks.end());
  CHECK_FALSE(cache.stored_version(evicted[0]));
  cache.completed(*load);
  CHECK(cache.reusable(evicted[0]) >= 0);
  CHECK(cache.free() == 6);
}

TEST_CASE("restores need the disk copy of the current version and no reader") {
  ChunkCache cache(4, 4, 2);
  std::optional<CacheJob> store = cache.begin(CacheOp::kStore, 1);
  cache.completed(*store);
  CHECK_FALSE(cache.begin(CacheOp::kRestore, 1));  // never spilled
  std::optional<CacheJob> spill = cache.begin(CacheOp::kSpill, 1);
  REQUIRE(spill);
  CHECK(spill->slots.empty());                     // the disk tier uses no GPU slots
  CHECK_FALSE(cache.begin(CacheOp::kRestore, 1));  // the spill still reads it
  cache.completed(*spill);
  CHECK_FALSE(cache.begin(CacheOp::kSpill, 1));    // the disk already holds this version
  std::optional<CacheJob> restore = cache.begin(CacheOp::kRestore, 1);
  REQUIRE(restore);
  CHECK_FALSE(cache.begin(CacheOp::kLoad, 1));     // a restore is writing it
  cache.completed(*restore);
  CHECK(cache.begin(CacheOp::kLoad, 1));
}

TEST_CASE("a failed store gives its chunks up and holds its slots until the epoch is released") {
  ChunkCache cache(4, 2, 3);
  std::optional<CacheJob> store = cache.begin(CacheOp::kStore, 2);
  REQUIRE(store);
  const std::vector<ChunkId> half_written = cache.failed(*store, 5);
  CHECK(half_written == store->chunks);
  CHECK_FALSE(cache.begin(CacheOp::kStore, 1));  // both slots held
  cache.epoch_released(4);
  CHECK_FALSE(cache.begin(CacheOp::kStore, 1));
  cache.epoch_released(5);
  CHECK(cache.begin(CacheOp::kStore, 1));
  CHECK(job_kind(CacheOp::kRestore) == JobKind::kStore);
  CHECK(job_kind(CacheOp::kSpill) == JobKind::kLoad);
}

}  // namespace
}  // namespace hugepin::cli
