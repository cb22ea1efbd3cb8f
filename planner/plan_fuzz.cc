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

namespace {

using namespace hugepin;
using namespace hugepin::planner;

// Two nodes with GPUs at 0000:17:00.0 and 0000:ca:00.0, a little of both hugepage sizes, and
// mounts for them: enough that every page size path is taken.
HostInfo fuzz_host() {
  HostInfo host;
  host.gpu_nodes = {{"0000:17:00.0", 0}, {"0000:ca:00.0", 1}, {"0000:00:02.0", -1}};
  PoolState& pool = host.pool;
  pool.default_page_size = 2 * kMiB;
  pool.page_sizes = {2 * kMiB, kGiB};
  pool.nodes = {0, 1};
  pool.per_node = {{0, 2 * kMiB, 1024, 1000, 0, 0}, {0, kGiB, 4, 4, 0, 0},
                   {1, 2 * kMiB, 512, 512, 0, 0}, {1, kGiB, 0, 0, 0, 0}};
  pool.system = {{-1, 2 * kMiB, 1536, 1512, 0, 10}, {-1, kGiB, 4, 4, 0, 0}};
  pool.mounts = {{"/dev/hugepages", 2 * kMiB, "rw"}, {"/dev/hugepages1G", kGiB, "rw"}};
  return host;
}

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
  static const HostInfo host = fuzz_host();
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
