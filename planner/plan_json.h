// The capacity plan as JSON: the stable, documented output of `hugepin plan --json` (schema in
// docs/planner.md, "Output"). Fields are only ever added; "version" changes if one changes meaning.
#pragma once

#include <nlohmann/json.hpp>

#include "planner/capacity_plan.h"

namespace hugepin::planner {

inline constexpr int kPlanJsonVersion = 1;

// The plan, keys in a fixed order. Byte counts are exact integers; nodes are -1 for none.
nlohmann::ordered_json plan_json(const CapacityPlan& plan);

}  // namespace hugepin::planner
