// For the spill tests (spill_test.cc, spill_direct_test.cc, spill_uring_test.cc): one rank region
// on 4 KiB shared memory, a spill file on this machine's disk, and random chunks both ways.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "base/pattern.h"
#include "base/size.h"
#include "disk/spill.h"
#include "disk/test_disk.h"
#include "hugemem/arena.h"
#include "tests/support/temp_dir.h"

namespace hugepin::test {

inline constexpr uint64_t kChunk = 256 * kKiB;

// One rank region on 4 KiB shared memory under its own /dev/shm directory, and a directory on
// the real disk for the spill file.
struct SpillFixture {
  TempDir shm{"/dev/shm"};
  TempDir disk{kDiskDir};
  ArenaOptions arena;
  MappedRegion region;
  std::string path = disk.path() + "/rank-0.spill";

  explicit SpillFixture(uint64_t bytes = 40 * kChunk + 3 * 4096) {
    arena.page_size = 4 * kKiB;
    arena.shm_dir = shm.path();
    arena.prefault_threads = 1;
    create_arena(real_os(), "hp-spill-file", {{0, bytes, -1}}, arena);
    region = open_region(real_os(), "hp-spill-file", 0, true, arena);
  }
  std::span<std::byte> memory() { return {region.data(), region.size()}; }
};

inline SpillOptions options_for(SpillIo io) {
  SpillOptions options;
  options.chunk_bytes = kChunk;
  options.io = io;
  options.queue_depth = 8;
  options.request_bytes = 64 * kKiB;
  options.threads = 3;
  return options;
}

inline std::vector<uint64_t> shuffled_chunks(uint64_t count, uint64_t seed) {
  std::vector<uint64_t> chunks(count);
  for (uint64_t i = 0; i < count; ++i) chunks[i] = i;
  std::mt19937_64 random(seed);
  std::shuffle(chunks.begin(), chunks.end(), random);
  return chunks;
}

// Spills every chunk (in random jobs of random order), zeroes the region, restores every chunk,
// and checks every byte.
inline void round_trip(SpillFile& file, std::span<std::byte> memory, uint64_t seed) {
  fill_pattern(memory.data(), memory.size(), seed);
  std::vector<uint64_t> chunks = shuffled_chunks(file.chunk_count(), seed);
  std::vector<SpillCompletion> jobs;
  for (size_t first = 0; first < chunks.size(); first += 7) {
    std::vector<uint64_t> job(chunks.begin() + static_cast<long>(first),
                              chunks.begin() + static_cast<long>(std::min(chunks.size(), first + 7)));
    jobs.push_back(file.spill(job));
  }
  for (const SpillCompletion& job : jobs) REQUIRE(job.wait().ok());
  std::memset(memory.data(), 0, memory.size());
  const SpillResult& restored = file.restore(shuffled_chunks(file.chunk_count(), seed + 1)).wait();
  REQUIRE(restored.ok());
  CHECK(restored.bytes == memory.size());
  CHECK_FALSE(find_pattern_mismatch(memory.data(), memory.size(), seed));
}

}  // namespace hugepin::test
