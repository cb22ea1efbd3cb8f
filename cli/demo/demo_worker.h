// One rank's process in `hugepin demo`: a WorkerSession over its rank, device KV on the GPU (or
// host memory), jobs from the scheduler's channel. It stamps what it stores and checks every
// block it loads; the session posts each job's report when its copies land.
#pragma once

#include <cstdint>
#include <string>

#include "cli/demo/demo_config.h"

namespace hugepin::demo {

struct WorkerSetup {
  const DemoConfig* config = nullptr;
  std::string arena;
  uint32_t rank = 0;    // flat rank
  int channel_fd = -1;  // the worker's end of its dispatch channel
  bool gpu = false;
  int device = 0;
};

// Runs the worker until the scheduler says stop, then exits the process: status 0, or 1 after
// one line on stderr naming the rank and what went wrong. Call in a forked child only.
[[noreturn]] void run_worker(const WorkerSetup& setup);

}  // namespace hugepin::demo
