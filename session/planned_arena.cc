#include "session/planned_arena.h"

#include "planner/plan_json.h"

namespace hugepin {

PlannedArena planned_arena(const planner::CapacityPlan& plan) {
  PlannedArena arena;
  arena.page_size = plan.page_size;
  arena.layout.tp = plan.tp;
  arena.layout.pp = plan.pp;
  arena.layout.blocks_per_chunk = plan.blocks_per_chunk;
  arena.layout.chunk_count = plan.chunk_count;
  for (const planner::RankPlan& rank : plan.ranks) {
    arena.layout.ranks.push_back(
        {rank.tp_rank, rank.pp_rank, rank.payload_bytes_per_block, rank.region_bytes, rank.numa_node});
  }
  arena.layout.plan_json = planner::plan_json(plan).dump();
  return arena;
}

}  // namespace hugepin
