// Scattered block copies between a pinned arena region and GPU memory, every backend side by
// side in one process, against the contiguous copy of the same bytes (the ceiling) and against
// what engines use now (one cudaMemcpyAsync per block, cudaMemcpyBatchAsync).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/stats.h"

namespace hugepin::bench {

struct GpuCopyOptions {
  std::vector<uint64_t> block_sizes;
  uint64_t bytes = uint64_t{1} << 30;  // moved per run and direction
  unsigned repeat = 5;
  unsigned sm_blocks = 4;
  uint64_t sm_slice_bytes = 0;         // CopyEngineOptions::sm_slice_bytes
  uint64_t auto_sm_below = 1 << 20;    // CopyEngineOptions::auto_sm_below_h2d and _d2h
  int device = 0;
  uint64_t page_size = 0;              // host region: 0 best available
  std::string hugetlbfs_dir;
};

struct GpuCopyRow {
  uint64_t block_bytes = 0;
  std::string direction;  // h2d, d2h, both
  std::string method;     // contiguous, per-block, batch, sm, sm-bulk, auto(<backend>)
  Summary gbps;
};

// REQUIRES: a CUDA device; throws Error otherwise, and when the arena or pinning fails.
std::vector<GpuCopyRow> run_gpu_copy_bench(const GpuCopyOptions& options,
                                           const std::function<void(const std::string&)>& progress);

}  // namespace hugepin::bench
