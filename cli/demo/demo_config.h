// What `hugepin demo` runs: a TP x PP engine in miniature, from its built-in plan.
#pragma once

#include <cstdint>
#include <string>

#include "dma/copy_engine.h"
#include "planner/capacity_plan.h"
#include "planner/plan_input.h"

namespace hugepin::demo {

struct DemoConfig {
  uint32_t tp = 2;
  uint32_t pp = 2;
  uint64_t cpu_bytes = uint64_t{512} << 20;  // host KV budget over all ranks
  uint64_t blocks_per_chunk = 16;
  uint64_t gpu_blocks = 512;      // each rank's GPU KV cache, in blocks
  uint32_t chunks_per_job = 4;
  uint32_t jobs_in_flight = 8;    // at most this many unsettled jobs
  double seconds = 3;             // how long the engine runs
  uint64_t page_size = 0;         // arena page size; 0: best available
  std::string backend = "auto";   // auto (GPU when one answers), gpu, host
  int kill_rank = -1;             // SIGKILL this flat rank's process ...
  double kill_after = 1;          // ... this many seconds in
  bool restart = false;           // replace a dead rank's process and go on
  bool keep = false;              // keep the arena afterwards
  std::string spill_dir;          // the disk tier: spill and restore chunks there ("" = none)
  bool progress = true;           // a progress line on stderr (when it is a terminal)
};

// The built-in plan input: every rank one FlashAttention-style KV tensor (2, num_blocks, 16
// tokens, heads, 128) of bf16; pipeline stage p has 8 >> (p % 2) heads, so stages hold unequal
// payloads (32 KiB and 16 KiB per segment); no GPU PCI addresses (no NUMA preference).
planner::PlanInput demo_plan_input(const DemoConfig& config);

// True when the demo's workers copy through CUDA (config.backend and the machine decide).
bool demo_uses_gpu(const DemoConfig& config);

}  // namespace hugepin::demo
