// The plan of the CLI's miniature engines (`hugepin demo`, `hugepin bench offload`): TP x PP ranks,
// each one FlashAttention-style KV tensor (2, num_blocks, 16 tokens, heads, 128) of bf16, where
// pipeline stage p has 8 >> (p % 2) heads, so stages hold unequal payloads (32 KiB and 16 KiB
// per segment); no GPU PCI addresses (no NUMA preference).
#pragma once

#include <cstdint>

#include "planner/plan_input.h"

namespace hugepin::cli {

struct MiniPlan {
  uint32_t tp = 2;
  uint32_t pp = 2;
  uint64_t cpu_bytes = 0;       // host KV budget over all ranks
  uint64_t blocks_per_chunk = 16;
  uint64_t gpu_blocks = 512;    // each rank's GPU KV cache, in blocks
  uint64_t page_size = 0;       // 0: best available
  uint64_t heads = 8;           // of even pipeline stages (odd ones: half)
};

planner::PlanInput mini_plan_input(const MiniPlan& plan);

}  // namespace hugepin::cli
