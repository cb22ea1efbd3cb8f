#include "cli/demo/demo_config.h"

#include "base/error.h"

namespace hugepin::demo {

planner::PlanInput demo_plan_input(const DemoConfig& config) {
  planner::PlanInput input;
  input.tp = config.tp;
  input.pp = config.pp;
  input.blocks_per_chunk = config.blocks_per_chunk;
  input.cpu_bytes = config.cpu_bytes;
  input.page_size = config.page_size;
  constexpr uint64_t kTokens = 16;
  constexpr uint64_t kHeadDim = 128;
  constexpr uint64_t kElement = 2;  // bf16
  for (uint32_t pp = 0; pp < config.pp; ++pp) {
    const uint64_t heads = pp % 2 == 0 ? 8 : 4;
    const uint64_t per_block = kTokens * heads * kHeadDim;  // elements of one block of K (or V)
    for (uint32_t tp = 0; tp < config.tp; ++tp) {
      planner::RankInput rank;
      rank.tp_rank = tp;
      rank.pp_rank = pp;
      rank.num_blocks = config.gpu_blocks;
      planner::TensorDescriptor tensor;
      tensor.name = cat("stage", pp, ".kv");
      tensor.shape = {2, config.gpu_blocks, kTokens, heads, kHeadDim};
      tensor.strides = {config.gpu_blocks * per_block, per_block, heads * kHeadDim, kHeadDim, 1};
      tensor.element_size = kElement;
      tensor.storage = cat("rank", pp * config.tp + tp);
      rank.tensors.push_back(tensor);
      input.ranks.push_back(rank);
    }
  }
  return input;
}

bool demo_uses_gpu(const DemoConfig& config) {
  if (config.backend == "host") return false;
  if (config.backend == "gpu") {
    if (!cuda_available()) throw Error("--backend gpu: no CUDA device is available (use --backend host)");
    return true;
  }
  return cuda_available();
}

}  // namespace hugepin::demo
