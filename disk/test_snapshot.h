// For the snapshot tests (snapshot_test.cc, snapshot_uring_test.cc, spill_mount_test.cc): an arena
// of 4 KiB shared memory with every region mapped, filled with and checked against seeded patterns.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/pattern.h"
#include "base/size.h"
#include "disk/snapshot.h"
#include "hugemem/arena.h"
#include "tests/support/temp_dir.h"

namespace hugepin::test {

// An arena of 4 KiB shared memory in its own /dev/shm directory, with every region mapped.
struct TestArena {
  TempDir shm{"/dev/shm"};
  ArenaOptions options;
  std::string name;
  std::vector<MappedRegion> regions;

  TestArena(std::string arena_name, const std::vector<uint64_t>& sizes) : name(std::move(arena_name)) {
    options.page_size = 4 * kKiB;
    options.shm_dir = shm.path();
    options.prefault_threads = 1;
    std::vector<RegionRequest> requests;
    for (uint32_t rank = 0; rank < sizes.size(); ++rank) requests.push_back({rank, sizes[rank], -1});
    create_arena(real_os(), name, requests, options);
    for (uint32_t rank = 0; rank < sizes.size(); ++rank) regions.push_back(open_region(real_os(), name, rank, true, options));
  }
  void fill(uint64_t seed) {
    for (size_t r = 0; r < regions.size(); ++r) fill_pattern(regions[r].data(), regions[r].size(), seed * 100 + r);
  }
  // True when every region holds the pattern of `seed`.
  bool holds(uint64_t seed) const {
    for (size_t r = 0; r < regions.size(); ++r) {
      if (find_pattern_mismatch(regions[r].data(), regions[r].size(), seed * 100 + r)) return false;
    }
    return true;
  }
  SnapshotOptions snapshot_options(uint64_t chunk_bytes = 256 * kKiB) const {
    SnapshotOptions snapshot;
    snapshot.chunk_bytes = chunk_bytes;
    snapshot.where = options;
    snapshot.io.queue_depth = 8;
    snapshot.io.threads = 2;
    return snapshot;
  }
};

}  // namespace hugepin::test
