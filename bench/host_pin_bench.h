// How long until host memory is ready: an arena region (reserve, fault, verify) against plain
// 4 KiB anonymous memory touched by as many threads. GPU registration joins in dma/.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/os.h"
#include "bench/stats.h"

namespace hugepin::bench {

struct HostPinOptions {
  uint64_t bytes = 0;
  uint64_t page_size = 0;             // arena page size; 0: best available
  std::vector<unsigned> thread_counts;  // each row's threads
  unsigned repeat = 3;
  unsigned warmup = 1;  // unmeasured runs first: the first touch of memory in a VM costs extra
  std::string hugetlbfs_dir;
};

struct HostPinRow {
  std::string method;  // "arena 2M" or "mmap 4K + touch"
  unsigned threads = 0;
  uint64_t page_size = 0;
  Summary reserve;  // seconds
  Summary fault;
  Summary verify;
  Summary total;
};

// Runs every method at every thread count, `repeat` times each, alternating methods so that a
// drift in the machine hits both. Calls `progress` with a line before each measurement.
std::vector<HostPinRow> run_host_pin_bench(Os& os, const HostPinOptions& options,
                                           const std::function<void(const std::string&)>& progress);

}  // namespace hugepin::bench
