// Time until N bytes of a worker's region are usable for GPU copies ("pin-ready"): an arena
// region (cold: created now; warm: already there, as after a worker restart) against
// cudaHostAlloc, against 4 KiB memory + cudaHostRegister (the engines' way), and against one bare
// cudaHostRegister of the same hugepages.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "bench/stats.h"

namespace hugepin::bench {

struct GpuPinOptions {
  uint64_t bytes = uint64_t{16} << 30;
  uint64_t page_size = uint64_t{2} << 20;
  uint64_t chunk_bytes = uint64_t{64} << 30;  // pin_region's largest registration
  unsigned pin_threads = 4;
  unsigned repeat = 3;
  int device = 0;
  std::string hugetlbfs_dir;
  // Which rows: arena-cold, arena-warm, bare-register, cudaHostAlloc, 4k-register.
  std::set<std::string> methods{"arena-cold", "arena-warm", "bare-register", "cudaHostAlloc", "4k-register"};
};

struct GpuPinRow {
  std::string method;
  Summary seconds;        // until usable
  Summary prepare;        // prefault / touch / allocate part
  Summary registration;   // cudaHostRegister part
  size_t chunks = 0;      // registrations (arena rows)
};

std::vector<GpuPinRow> run_gpu_pin_bench(const GpuPinOptions& options,
                                         const std::function<void(const std::string&)>& progress);

}  // namespace hugepin::bench
