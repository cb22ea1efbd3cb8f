#include "ipc/arena_layout.h"

#include <algorithm>
#include <set>

#include "base/error.h"
#include "base/size.h"
#include "protocol/report.h"

namespace hugepin {

ArenaLayout layout_for_size(uint64_t total_bytes, uint32_t ranks, uint64_t chunk_bytes, int numa_node) {
  if (ranks == 0) throw Error("--ranks must be at least 1");
  if (chunk_bytes == 0) throw Error("--chunk must be at least 1 byte");
  ArenaLayout layout;
  layout.tp = ranks;
  layout.pp = 1;
  layout.blocks_per_chunk = 1;
  const uint64_t smallest = total_bytes / ranks;
  if (smallest < chunk_bytes) {
    throw Error(cat("--size ", format_bytes(total_bytes), " over ", ranks, " ranks gives ", format_bytes(smallest),
                    " per rank, less than one --chunk of ", format_bytes(chunk_bytes)));
  }
  layout.chunk_count = smallest / chunk_bytes;
  for (uint32_t rank = 0; rank < ranks; ++rank) {
    uint64_t bytes = smallest + (rank < total_bytes % ranks ? 1 : 0);
    layout.ranks.push_back({rank, 0, chunk_bytes, bytes, numa_node});
  }
  return layout;
}

uint32_t flat_rank_of(const ArenaLayout& layout, const RankRegionLayout& rank) {
  return flat_rank(rank.tp_rank, rank.pp_rank, layout.tp);
}

void check_layout(const ArenaLayout& layout) {
  if (layout.tp == 0 || layout.pp == 0) throw Error(cat("layout has tp ", layout.tp, " and pp ", layout.pp, ": both must be at least 1"));
  const uint64_t rank_count = uint64_t{layout.tp} * layout.pp;
  if (rank_count > kMaxArenaRanks) throw Error(cat("layout has tp * pp = ", rank_count, " ranks, more than ", kMaxArenaRanks));
  if (layout.ranks.size() != rank_count) {
    throw Error(cat("layout has ", layout.ranks.size(), " ranks, tp * pp = ", layout.tp, " * ", layout.pp, " = ", rank_count));
  }
  if (layout.blocks_per_chunk == 0) throw Error("layout has blocks_per_chunk 0");
  if (layout.chunk_count == 0) throw Error("layout has chunk_count 0");
  if (layout.plan_json.size() > kMaxPlanJsonBytes) {
    throw Error(cat("plan text is ", layout.plan_json.size(), " bytes, more than the ", kMaxPlanJsonBytes, " a control segment keeps"));
  }
  std::set<uint32_t> seen;
  for (const RankRegionLayout& rank : layout.ranks) {
    std::string name = cat("rank (tp ", rank.tp_rank, ", pp ", rank.pp_rank, ")");
    if (rank.tp_rank >= layout.tp || rank.pp_rank >= layout.pp) {
      throw Error(cat(name, " is outside tp ", layout.tp, " x pp ", layout.pp));
    }
    if (!seen.insert(flat_rank_of(layout, rank)).second) throw Error(cat(name, " is given twice"));
    if (rank.payload_bytes_per_block == 0) throw Error(cat(name, " has payload_bytes_per_block 0"));
    if (rank.numa_node < -1) throw Error(cat(name, " has NUMA node ", rank.numa_node));
    // chunk_count * blocks_per_chunk * payload, without overflow.
    const uint64_t blocks_limit = ~uint64_t{0} / layout.blocks_per_chunk;
    if (layout.chunk_count > blocks_limit ||
        layout.chunk_count * layout.blocks_per_chunk > ~uint64_t{0} / rank.payload_bytes_per_block) {
      throw Error(cat(name, ": ", layout.chunk_count, " chunks of ", layout.blocks_per_chunk, " blocks of ",
                      rank.payload_bytes_per_block, " bytes overflow 64 bits"));
    }
    const uint64_t needed = layout.chunk_count * layout.blocks_per_chunk * rank.payload_bytes_per_block;
    if (rank.region_bytes < needed) {
      throw Error(cat(name, " has region_bytes ", rank.region_bytes, ", less than its ", layout.chunk_count,
                      " chunks need (", needed, ")"));
    }
  }
}

}  // namespace hugepin
