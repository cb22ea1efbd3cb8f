// A plan from a plan input file and this host: the CLI's side of the planner, which itself
// touches no files and no kernel.
#pragma once

#include <string>

#include "base/os.h"
#include "planner/capacity_plan.h"
#include "planner/plan_input.h"

namespace hugepin::cli {

// Reads the plan input at `path`, gathers the host facts through `os` and plans. Throws Error
// "<path>: <why>" (one line, naming the field) when the file cannot be read or the plan is
// rejected.
planner::CapacityPlan plan_from_file(Os& os, const std::string& path);

}  // namespace hugepin::cli
