// ChunkGeometry: where the blocks of a chunk live in every rank's host region, as one value.
//
// A plan gives every rank the same chunk count and blocks per chunk; each rank holds its own
// payload per block, split into segments (a K/V outer dimension makes two; planner/kv_layout.h).
// A rank's region is laid out segment-major: every host block of segment 0, then every host
// block of segment 1, and so on, each segment's blocks `bytes_per_block` apart:
//
//   host block of (chunk c, block b of the chunk)  h = c * blocks_per_chunk + b
//   its bytes in segment s                         region + host_offset[s] + h * bytes_per_block[s]
//
// Chunk ids are ChunkId (32-bit) everywhere: a plan whose chunk count does not fit is refused
// here, by name, instead of being truncated further down.
//
// Thread-safety: an immutable value once built; copy freely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/contract.h"
#include "dma/copy_types.h"
#include "ipc/arena_layout.h"
#include "planner/capacity_plan.h"
#include "protocol/offload_types.h"

namespace hugepin {

// The most chunks an arena may have: every chunk id fits ChunkId.
inline constexpr uint64_t kMaxChunkCount = UINT32_MAX;

struct SegmentGeometry {
  uint64_t bytes_per_block = 0;
  uint64_t host_offset = 0;  // of host block 0, from the start of the rank's region
  // Bytes between consecutive host blocks; equal to bytes_per_block (blocks are packed).
  uint64_t host_block_stride = 0;
};

struct RankGeometry {
  uint32_t rank = 0;  // flat: pp_rank * tp + tp_rank
  uint32_t tp_rank = 0;
  uint32_t pp_rank = 0;
  std::vector<SegmentGeometry> segments;
  uint64_t payload_bytes_per_block = 0;  // the sum over segments
  uint64_t host_bytes = 0;               // the payload part of the region: host_blocks * payload
};

// One segment of an engine's own device KV cache: block b starts at device_base + b *
// block_stride and holds bytes_per_block bytes.
struct DeviceSegment {
  uint64_t device_base = 0;
  uint64_t block_stride = 0;
  uint64_t blocks = 0;
  uint64_t bytes_per_block = 0;
};

class ChunkGeometry {
 public:
  ChunkGeometry() = default;
  // `segment_bytes[r]` lists rank r's segment sizes per block, ranks in flat order. Throws Error
  // naming the value when chunk_count is 0 or above kMaxChunkCount, blocks_per_chunk is 0, tp or
  // pp is 0, tp * pp differs from the rank count, a rank has no segment or a zero segment, or a
  // size overflows 64 bits.
  ChunkGeometry(uint32_t tp, uint32_t pp, uint64_t chunk_count, uint64_t blocks_per_chunk,
                const std::vector<std::vector<uint64_t>>& segment_bytes);

  // From a capacity plan: each rank's segments as the planner split its storages (one segment of
  // the payload when the plan gave bytes_per_block directly).
  static ChunkGeometry of_plan(const planner::CapacityPlan& plan);
  // From what an arena's control segment records: the segments of its plan text when it has one,
  // else one segment per rank of its payload. Throws Error when the plan text does not parse or
  // disagrees with the layout.
  static ChunkGeometry of_layout(const ArenaLayout& layout);

  uint32_t tp() const { return tp_; }
  uint32_t pp() const { return pp_; }
  uint32_t ranks() const { return static_cast<uint32_t>(ranks_.size()); }
  uint64_t chunk_count() const { return chunk_count_; }
  uint64_t blocks_per_chunk() const { return blocks_per_chunk_; }
  // Host blocks per segment: chunk_count * blocks_per_chunk.
  uint64_t host_blocks() const { return chunk_count_ * blocks_per_chunk_; }
  // REQUIRES: rank < ranks().
  const RankGeometry& rank(uint32_t rank) const {
    HUGEPIN_REQUIRE(rank < ranks_.size(), "rank ", rank, " of ", ranks_.size());
    return ranks_[rank];
  }

  // The host block of block `block` of chunk `chunk`. Throws Error naming the value when either
  // is out of range.
  uint64_t host_block(uint64_t chunk, uint64_t block) const;
  // Bytes of one chunk in one segment of `rank`, and of one whole chunk on `rank`.
  uint64_t chunk_segment_bytes(uint32_t rank, size_t segment) const;
  uint64_t chunk_bytes(uint32_t rank) const;
  // Bytes of one chunk over all ranks.
  uint64_t chunk_bytes_all_ranks() const;
  // Offset in rank `rank`'s region of block `block` of chunk `chunk` in segment `segment`.
  uint64_t host_block_offset(uint32_t rank, size_t segment, uint64_t chunk, uint64_t block) const;

  // Appends the block pairs that copy `chunk` between its host blocks and the device blocks
  // gpu_first_block .. gpu_first_block + blocks_per_chunk - 1, in `direction` (a store copies
  // device -> host: src is the device block). Throws Error for a chunk out of range.
  void append_chunk_pairs(Direction direction, uint64_t chunk, uint64_t gpu_first_block,
                          std::vector<BlockPair>* pairs) const;
  // The same with any device blocks: chunk i of `chunks` goes with device blocks
  // gpu_blocks[i * blocks_per_chunk .. (i + 1) * blocks_per_chunk - 1]. Throws Error when
  // gpu_blocks.size() != chunks.size() * blocks_per_chunk or a chunk is out of range.
  void append_job_pairs(Direction direction, std::span<const ChunkId> chunks, std::span<const uint64_t> gpu_blocks,
                        std::vector<BlockPair>* pairs) const;

  // The copy engine's views of rank `rank`: its host region at `host_base`, its device segments
  // at `device` (one per segment, in order). Throws Error naming the segment when the count or a
  // bytes_per_block differs from this geometry's.
  std::vector<SegmentView> segment_views(uint32_t rank, std::byte* host_base,
                                         std::span<const DeviceSegment> device) const;

 private:
  uint32_t tp_ = 0;
  uint32_t pp_ = 0;
  uint64_t chunk_count_ = 0;
  uint64_t blocks_per_chunk_ = 0;
  std::vector<RankGeometry> ranks_;
};

}  // namespace hugepin
