#include "cli/engine/mini_plan.h"

#include "base/error.h"

namespace hugepin::cli {

planner::PlanInput mini_plan_input(const MiniPlan& plan) {
  planner::PlanInput input;
  input.tp = plan.tp;
  input.pp = plan.pp;
  input.blocks_per_chunk = plan.blocks_per_chunk;
  input.cpu_bytes = plan.cpu_bytes;
  input.page_size = plan.page_size;
  constexpr uint64_t kTokens = 16;
  constexpr uint64_t kHeadDim = 128;
  for (uint32_t pp = 0; pp < plan.pp; ++pp) {
    const uint64_t heads = pp % 2 == 0 ? plan.heads : plan.heads / 2;
    const uint64_t per_block = kTokens * heads * kHeadDim;  // elements of one block of K (or V)
    for (uint32_t tp = 0; tp < plan.tp; ++tp) {
      planner::RankInput rank;
      rank.tp_rank = tp;
      rank.pp_rank = pp;
      rank.num_blocks = plan.gpu_blocks;
      planner::TensorDescriptor tensor;
      tensor.name = cat("stage", pp, ".kv");
      tensor.shape = {2, plan.gpu_blocks, kTokens, heads, kHeadDim};
      tensor.strides = {plan.gpu_blocks * per_block, per_block, heads * kHeadDim, kHeadDim, 1};
      tensor.element_size = 2;  // bf16
      tensor.storage = cat("rank", pp * plan.tp + tp);
      rank.tensors.push_back(tensor);
      input.ranks.push_back(rank);
    }
  }
  return input;
}

}  // namespace hugepin::cli
