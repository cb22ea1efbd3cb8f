// How much a bf16 matrix-multiply loop (cuBLAS, loaded at run time) slows down while each copy
// backend moves blocks both ways at full rate on the same GPU: SM kernels take SMs, DMA takes
// none but shares memory bandwidth.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/stats.h"

namespace hugepin::bench {

struct OverlapOptions {
  uint64_t block_bytes = 16 * 1024;
  uint64_t copy_bytes = uint64_t{512} << 20;  // per copy launch and direction
  unsigned matmul_size = 8192;                 // M = N = K
  unsigned matmuls_per_sample = 40;
  unsigned repeat = 5;
  unsigned sm_blocks = 4;
  uint64_t sm_slice_bytes = 0;                 // CopyEngineOptions::sm_slice_bytes
  int device = 0;
  uint64_t page_size = 0;
  std::string hugetlbfs_dir;
};

struct OverlapRow {
  std::string backend;     // "none" for the matmul alone
  Summary tflops;          // matmul rate while the copies ran
  double slowdown = 0;     // 1 - tflops / tflops alone (medians)
  double copy_gbps = 0;    // both directions together, while the matmuls ran
};

// REQUIRES: a CUDA device and libcublas; throws Error otherwise.
std::vector<OverlapRow> run_overlap_bench(const OverlapOptions& options,
                                          const std::function<void(const std::string&)>& progress);

}  // namespace hugepin::bench
