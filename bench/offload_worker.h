// One rank process of `hugepin bench offload`: a WorkerSession over its rank (timing the copies of
// one job in time_every), a device KV stand-in, and the three ways the benchmark moves the same
// blocks: the copy engine alone, the hugepin path (reports posted from the completion itself),
// and the engines' way (poll the copy's CUDA event, send the completion over the Unix socket).
#pragma once

#include <cstdint>
#include <string>

namespace hugepin::bench {

struct OffloadWorkerSetup {
  std::string arena;
  uint32_t rank = 0;      // flat
  uint32_t tp = 1;
  int channel = -1;       // this rank's end of its socket pair
  int device = -1;        // GPU, or -1 for the host backend
  uint64_t gpu_blocks = 0;
  int64_t poll_interval_ns = 50'000;  // the engines' way: how often a waiting rank checks its events
  int64_t completion_poll_ns = 0;     // CopyEngineOptions::completion_poll_ns
  bool spin = false;                  // OffloadBenchOptions::spin
  uint32_t time_every = 1;            // OffloadBenchOptions::time_every
};

// Runs until kStop, then exits the process: 0, or 1 after one line on stderr.
[[noreturn]] void run_offload_worker(const OffloadWorkerSetup& setup);

}  // namespace hugepin::bench
