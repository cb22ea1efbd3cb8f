// The arena a capacity plan asks for: `hugepin arena create NAME --plan FILE`, and what
// SchedulerSession::create makes.
#pragma once

#include <cstdint>

#include "ipc/arena_layout.h"
#include "planner/capacity_plan.h"

namespace hugepin {

struct PlannedArena {
  ArenaLayout layout;      // one rank per planned rank, the plan's JSON in plan_json
  uint64_t page_size = 0;  // the plan's page size
};

// The layout of a plan: tp, pp, blocks_per_chunk and the common chunk count; per rank its
// payload per block, region bytes (as planned, rounded to the page) and NUMA node (-1: none).
PlannedArena planned_arena(const planner::CapacityPlan& plan);

}  // namespace hugepin
