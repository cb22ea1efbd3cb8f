// libFuzzer target: any bytes as a plan input. Parsing, validation and planning must end in a
// plan or a hugepin::Error, never a crash, a hang, a leak or another exception; a plan must keep
// the planner's promises (checked here, so the fuzzer also hunts for wrong plans).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "base/error.h"
#include "base/size.h"
#include "planner/capacity_plan.h"
#include "planner/plan_input.h"
#include "planner/plan_json.h"
#include "planner/test_host.h"

namespace {

using namespace hugepin;
using namespace hugepin::planner;

void check(bool promise) {
  if (!promise) std::abort();
}

void check_promises(const CapacityPlan& plan) {
  check(plan.chunk_count >= 1);
  check(plan.payload_bytes <= plan.cpu_bytes);
  // One more chunk would not fit (or would not even be representable).
  uint64_t more = 0;
  check(__builtin_add_overflow(plan.payload_bytes, plan.chunk_bytes, &more) || more > plan.cpu_bytes);
  uint64_t sum = 0;
  for (const RankPlan& rank : plan.ranks) {
    check(rank.region_bytes >= rank.payload_bytes);
    check(rank.region_bytes - rank.payload_bytes < plan.page_size);
    check(rank.region_bytes % plan.page_size == 0);
    sum += rank.payload_bytes;
  }
  check(sum == plan.payload_bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const HostInfo host = planner::test::two_node_host();  // every page size path can be taken
  try {
    PlanInput input = parse_plan_input(std::string_view(reinterpret_cast<const char*>(data), size));
    CapacityPlan plan = make_plan(input, host);
    check_promises(plan);
    check(!plan_json(plan).dump().empty());
  } catch (const hugepin::Error&) {
    // A rejected input: the expected outcome for most bytes.
  }
  return 0;
}
