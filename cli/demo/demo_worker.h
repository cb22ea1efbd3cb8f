// One rank's process in `hugepin demo`: attaches its region, copies what the scheduler sends
// with the copy engine (CUDA when present, host memcpy otherwise), checks every block it loads,
// and posts copy-complete and compute-release reports to its ring.
#pragma once

#include <cstdint>
#include <string>

#include "cli/demo/demo_config.h"
#include "planner/capacity_plan.h"

namespace hugepin::demo {

struct WorkerSetup {
  const DemoConfig* config = nullptr;
  const planner::CapacityPlan* plan = nullptr;
  std::string arena;
  uint32_t rank = 0;     // flat rank
  int channel_fd = -1;   // the worker's end of its dispatch channel
  bool gpu = false;
  int device = 0;
};

// Runs the worker until the scheduler says stop, then exits the process: status 0, or 1 after
// one line on stderr naming the rank and what went wrong. Call in a forked child only.
[[noreturn]] void run_worker(const WorkerSetup& setup);

}  // namespace hugepin::demo
