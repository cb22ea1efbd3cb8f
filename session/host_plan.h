// Planning on this host: the planner (planner/) is pure, so the facts it needs about the machine
// (the hugepage pool, the NUMA node of each rank's GPU) are read here, through the Os seam.
#pragma once

#include <string_view>

#include "base/os.h"
#include "hugemem/pool.h"
#include "planner/capacity_plan.h"
#include "planner/host_info.h"
#include "planner/plan_input.h"

namespace hugepin {

// The pool as the planner takes it: the sizes the kernel supports, those a hugetlbfs mount
// serves, and per node and system-wide the pages held and those a new mapping can still get
// (PoolState::available).
planner::HostPool host_pool(const PoolState& pool);

// The host facts the planner needs for `input`: the hugepage pool, and the NUMA node of every
// rank's GPU. A GPU that is not on this host is left out (make_plan rejects it, naming the rank's
// gpu_pci). Throws Error when a kernel file is unreadable or malformed.
planner::HostInfo read_host_info(Os& os, const planner::PlanInput& input);

// Parses plan input `json` (planner/plan_input.h) and plans it on this host. Throws Error naming
// the JSON path at fault (EINVAL), or what could not be read from the host.
planner::CapacityPlan plan_on_host(Os& os, std::string_view json);

}  // namespace hugepin
