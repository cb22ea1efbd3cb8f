#include "cli/plan_arena.h"

namespace hugepin::cli {

PlannedArena planned_arena(const planner::CapacityPlan& plan) {
  PlannedArena arena;
  arena.page_size = plan.page_size;
  for (const planner::RankPlan& rank : plan.ranks) {
    arena.regions.push_back({rank.rank, rank.region_bytes, rank.numa_node});
  }
  return arena;
}

}  // namespace hugepin::cli
