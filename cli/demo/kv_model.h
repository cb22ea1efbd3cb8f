// The demo's KV data: where each segment of a rank's KV cache lives on the "GPU" side and in the
// rank's host region, and what bytes each block holds, so that any process can check any block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dma/copy_types.h"
#include "planner/capacity_plan.h"

namespace hugepin::demo {

struct SegmentShape {
  uint64_t bytes_per_block = 0;
  uint64_t device_offset = 0;  // block 0 of this segment in the rank's device allocation
  uint64_t host_offset = 0;    // block 0 of this segment in the rank's host region
};

// One rank's KV cache: its storages laid out one after another on the device (each split into
// its segments the way the planner split it), and the host region segment-major: all blocks of
// segment 0, then of segment 1, ...
struct RankShape {
  std::vector<SegmentShape> segments;
  uint64_t device_blocks = 0;
  uint64_t device_bytes = 0;
  uint64_t host_blocks = 0;  // chunk_count * blocks_per_chunk
  uint64_t host_bytes = 0;   // the payload part of the region
};

RankShape rank_shape(const planner::RankPlan& rank, uint64_t chunk_count, uint64_t blocks_per_chunk);

// The copy engine's views of `shape` over a device allocation and a host region.
std::vector<SegmentView> segment_views(const RankShape& shape, uint64_t device_base, std::byte* host_base);

// The seed of the bytes of one block: chunk `chunk` at store `version`, on `rank`, segment
// `segment`, block `block` of the chunk. Every block's bytes are fill_pattern(seed).
uint64_t block_seed(uint64_t chunk, uint64_t version, uint32_t rank, uint64_t segment, uint64_t block);

}  // namespace hugepin::demo
