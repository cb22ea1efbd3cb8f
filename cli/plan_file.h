// A plan from a plan input file and this host: the CLI's side of the planner, which itself
// touches no files and no kernel.
#pragma once

#include <string>

#include "base/os.h"
#include "planner/capacity_plan.h"
#include "planner/plan_input.h"

namespace hugepin::cli {

// The host facts the planner needs for `input`: the hugepage pool, and the NUMA node of every
// rank's GPU, read through `os`. A GPU that is not on this host is left out (make_plan rejects
// it, naming the rank's gpu_pci). Throws Error when a kernel file is unreadable or malformed.
planner::HostInfo read_host_info(Os& os, const planner::PlanInput& input);

// Reads the plan input at `path`, gathers the host facts through `os` and plans. Throws Error
// "<path>: <why>" (one line, naming the field) when the file cannot be read or the plan is
// rejected.
planner::CapacityPlan plan_from_file(Os& os, const std::string& path);

}  // namespace hugepin::cli
