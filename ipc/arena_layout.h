// ArenaLayout: what an arena with a control segment holds, as plain data.
//
// A TP x PP layout of rank regions that share one chunk count: chunk c of every rank holds the
// same blocks, each rank its own payload per block (pipeline stages differ). The planner's plan
// becomes an ArenaLayout (that glue lives outside ipc/); `--size --ranks` arenas get one from
// layout_for_size().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hugemem/naming.h"  // kMaxArenaRanks

namespace hugepin {

// One rank's region in an arena: where the rank sits in the TP x PP grid and what its region
// holds (the planner's planner::RankLayout is the KV cache's storages, not a region).
struct RankRegionLayout {
  uint32_t tp_rank = 0;
  uint32_t pp_rank = 0;
  uint64_t payload_bytes_per_block = 0;  // this rank's bytes of one block
  uint64_t region_bytes = 0;             // its region: at least chunk_count * blocks_per_chunk * payload
  int numa_node = -1;                    // -1: no preference
};

struct ArenaLayout {
  uint32_t tp = 0;
  uint32_t pp = 0;
  uint64_t blocks_per_chunk = 0;
  uint64_t chunk_count = 0;             // common to every rank
  std::vector<RankRegionLayout> ranks;  // any order; each (tp_rank, pp_rank) once
  std::string plan_json;                // the plan it came from; empty for --size arenas
};

// Longest plan text a control segment keeps.
inline constexpr uint64_t kMaxPlanJsonBytes = 16 * 1024 * 1024;

// The layout of `--size total_bytes --ranks ranks --chunk chunk_bytes`: tp = ranks, pp = 1, one
// block per chunk of chunk_bytes; regions split total_bytes evenly (the remainder to the first
// ranks), and chunk_count is what the smallest region holds. Throws Error naming the value when
// ranks is 0, chunk_bytes is 0, or a region is smaller than one chunk.
ArenaLayout layout_for_size(uint64_t total_bytes, uint32_t ranks, uint64_t chunk_bytes, int numa_node = -1);

// Throws Error naming the field when the layout is not one an arena can have: tp or pp is 0,
// tp * pp differs from the number of ranks or exceeds kMaxArenaRanks, a rank is out of range or
// given twice, a payload, blocks_per_chunk or chunk_count is 0, a region is smaller than its
// chunks (checked for overflow), or the plan text is longer than kMaxPlanJsonBytes.
void check_layout(const ArenaLayout& layout);

// The rank of `layout.ranks[i]` in flat order (pp_rank * tp + tp_rank), as the arena's regions
// and the control segment number them.
uint32_t flat_rank_of(const ArenaLayout& layout, const RankRegionLayout& rank);

}  // namespace hugepin
