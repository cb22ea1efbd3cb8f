// The arena a capacity plan asks for: `hugepin arena create NAME --plan FILE`.
#pragma once

#include <cstdint>
#include <vector>

#include "hugemem/backing.h"
#include "planner/capacity_plan.h"

namespace hugepin::cli {

struct PlannedArena {
  std::vector<RegionRequest> regions;  // one per rank, in flat-rank order
  uint64_t page_size = 0;              // the plan's page size
};

// One region per planned rank: rank = flat rank (pp_rank * tp + tp_rank), bytes = region_bytes,
// node = numa_node (-1: no preference); the plan's page size for all.
PlannedArena planned_arena(const planner::CapacityPlan& plan);

}  // namespace hugepin::cli
