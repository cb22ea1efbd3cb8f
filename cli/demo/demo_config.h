// What `hugepin demo` runs: a TP x PP engine in miniature (cli/engine/mini_plan.h is its plan).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "cli/engine/mini_plan.h"

namespace hugepin::demo {

struct DemoConfig {
  cli::MiniPlan plan{2, 2, uint64_t{512} << 20, 16, 512, 0, 8};  // TP 2 x PP 2, 512 MiB of host KV
  uint32_t chunks_per_job = 4;
  uint32_t jobs_in_flight = 8;    // at most this many unsettled jobs
  double seconds = 3;             // how long the engine runs
  std::string backend = "auto";   // auto (GPU when one answers), gpu, host
  int kill_rank = -1;             // SIGKILL this flat rank's process ...
  double kill_after = 1;          // ... this many seconds in
  bool restart = false;           // replace a dead rank's process and go on
  bool keep = false;              // keep the arena afterwards
  std::string spill_dir;          // the disk tier: spill and restore chunks there ("" = none)
  bool progress = true;           // a progress line on stderr (when it is a terminal)
  // Called at every step; throws to stop the run (Ctrl-C: cli/interruption.h). The arena and the
  // workers go as the run unwinds, unless keep.
  std::function<void()> check_interrupted = [] {};
};

}  // namespace hugepin::demo
