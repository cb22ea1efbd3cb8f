// The capacity plan: how many chunks of host KV blocks every rank gets, each rank's private
// region, where it lives, and whether the hugepage pool can hold it now.
//
//   payload(r)   = rank r's logical KV bytes per block (kv_layout.h, or bytes_per_block)
//   chunk_count  = floor(cpu_bytes / (blocks_per_chunk * sum over ranks of payload(r)))
//   region(r)    = chunk_count * blocks_per_chunk * payload(r), rounded up to the page size
//
// Every rank shares the one chunk count (chunk ids are global), while pipeline stages may hold
// different payloads and so get different regions. The rounding is reported and never counts
// as payload: the payload of all ranks together never exceeds cpu_bytes, and one more chunk
// would. A rank's NUMA node is its GPU's (-1, no preference, without a GPU or an affinity).
//
// Pure: no Os, no files, no globals, no hugemem/. Host facts come in as data (HostInfo,
// planner/host_info.h), filled by the caller from sysfs (session/host_plan.h) or, in tests, by
// hand.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "planner/host_info.h"
#include "planner/kv_layout.h"
#include "planner/plan_input.h"

namespace hugepin::planner {

// At most this many KV cache groups (indices 0 .. kMaxGroups - 1); engines use a handful.
inline constexpr uint32_t kMaxGroups = 1024;

// One KV cache group's share of a rank's payload.
struct GroupPayload {
  uint32_t group = 0;
  uint64_t bytes_per_block = 0;  // 0: the group has no layers on this rank (kept by index)
};

struct RankPlan {
  uint32_t rank = 0;  // flat rank: pp_rank * tp + tp_rank
  uint32_t tp_rank = 0;
  uint32_t pp_rank = 0;
  std::string gpu_pci;  // "" when the input gives none
  int numa_node = -1;
  uint64_t num_blocks = 0;
  RankLayout layout;                // no storages when the input gives bytes_per_block
  std::vector<GroupPayload> groups; // every group of the plan, by index; empty with bytes_per_block
  uint64_t payload_bytes_per_block = 0;
  uint64_t payload_bytes = 0;   // chunk_count * blocks_per_chunk * payload_bytes_per_block
  uint64_t region_bytes = 0;    // payload_bytes rounded up to page_size
  uint64_t rounding_bytes = 0;  // region_bytes - payload_bytes
  uint64_t pages = 0;           // region_bytes / page_size
};

// The pages one NUMA node needs, and what the pool has for them now.
struct PoolNeed {
  int node = -1;  // -1: ranks without a node, served from anywhere (counted system-wide)
  uint64_t page_size = 0;
  uint64_t pages_needed = 0;
  std::optional<uint64_t> pages_available;  // nullopt for 4 KiB pages: shared memory, no pool
  bool can_serve = false;
  std::string fix;  // the `hugepin pool set ...` line that would serve it; "" when it can
};

enum class PageSizeChoice {
  kRequested,      // the input's page_size
  kBestAvailable,  // the largest size the pool (pages and a hugetlbfs mount) can serve now
  kFallback,       // no size can be served now: 2 MiB, to be reserved (or 4 KiB shm at create)
};

struct CapacityPlan {
  uint32_t tp = 0;
  uint32_t pp = 0;
  uint64_t blocks_per_chunk = 0;
  uint64_t cpu_bytes = 0;
  uint64_t chunk_count = 0;
  uint64_t payload_bytes_per_block = 0;  // sum over ranks
  uint64_t chunk_bytes = 0;     // blocks_per_chunk * payload_bytes_per_block: one chunk, all ranks
  uint64_t payload_bytes = 0;   // chunk_count * chunk_bytes <= cpu_bytes
  uint64_t region_bytes = 0;    // sum over ranks
  uint64_t rounding_bytes = 0;  // sum over ranks
  uint64_t page_size = 0;
  PageSizeChoice page_size_choice = PageSizeChoice::kRequested;
  bool pool_can_serve = false;  // every node's need, the system total and a mount, now
  std::vector<std::string> notes;  // one line each: what the operator should know
  std::vector<uint32_t> groups;    // every KV cache group index any rank's tensors name
  std::vector<RankPlan> ranks;     // by flat rank
  std::vector<PoolNeed> pool;      // by node (-1 first)
};

// Validates `input` and plans it on `host`. Throws Error "<json path> = <value>: <why>" when:
// tp, pp or blocks_per_chunk is 0; dp, pcp or dcp is not 1; the rank count is not tp * pp; a
// (tp_rank, pp_rank) is out of range, duplicated or missing; a rank has no KV tensors, both
// tensors and bytes_per_block, num_blocks 0, or zero payload; a layout cannot be split
// (kv_layout.h); a group index is kMaxGroups or more; a GPU is not in host.gpu_nodes; the chunk
// count is 0 (naming the bytes the smallest plan needs); or any size overflows 64 bits.
CapacityPlan make_plan(const PlanInput& input, const HostInfo& host);

// "requested", "best_available", "fallback": as the JSON output spells it.
const char* page_size_choice_name(PageSizeChoice choice);

}  // namespace hugepin::planner
