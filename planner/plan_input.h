// The planner's input: the parallel layout, the byte budget and every rank's KV cache, as the
// engine describes them in JSON (the format is documented in docs/planner.md, "Input").
//
// parse_plan_input checks the JSON's shape and types; make_plan (capacity_plan.h) checks what
// the values mean. Both name the JSON path of the value at fault in their one-line errors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/kv_layout.h"

namespace hugepin::planner {

struct RankInput {
  uint32_t tp_rank = 0;
  uint32_t pp_rank = 0;
  std::string gpu_pci;  // normalized ("0000:17:00.0"); "" when not given: no NUMA preference
  uint64_t num_blocks = 0;
  std::vector<TensorDescriptor> tensors;
  std::optional<uint64_t> bytes_per_block;  // the payload given directly, instead of tensors
};

struct PlanInput {
  uint32_t tp = 0;
  uint32_t pp = 0;
  uint32_t dp = 1;
  uint32_t pcp = 1;
  uint32_t dcp = 1;
  uint64_t blocks_per_chunk = 0;
  uint64_t cpu_bytes = 0;
  uint64_t page_size = 0;        // 0: best available
  std::vector<RankInput> ranks;  // in input order: ranks[i] is the JSON's ranks[i]
};

// Parses the JSON text of a plan input. Unknown fields are rejected (a misspelt optional field
// would otherwise be silently ignored). Integers must be JSON integers in range; cpu_bytes may
// also be a float, truncated toward zero. Throws Error "<path> = <value>: <why>" for malformed
// JSON, a missing or unknown field, a wrong type or an out-of-range number.
PlanInput parse_plan_input(std::string_view json_text);

}  // namespace hugepin::planner
