#include "cli/demo/kv_model.h"

#include "base/pattern.h"

namespace hugepin::demo {

RankShape rank_shape(const planner::RankPlan& rank, uint64_t chunk_count, uint64_t blocks_per_chunk) {
  RankShape shape;
  shape.device_blocks = rank.num_blocks;
  shape.host_blocks = chunk_count * blocks_per_chunk;
  uint64_t device = 0;
  uint64_t host = 0;
  for (const planner::StorageLayout& storage : rank.layout.storages) {
    const uint64_t segment_stride = storage.storage_bytes / storage.segments;
    for (uint64_t s = 0; s < storage.segments; ++s) {
      shape.segments.push_back({storage.segment_bytes_per_block, device + s * segment_stride, host});
      host += shape.host_blocks * storage.segment_bytes_per_block;
    }
    device += storage.storage_bytes;
  }
  shape.device_bytes = device;
  shape.host_bytes = host;
  return shape;
}

std::vector<SegmentView> segment_views(const RankShape& shape, uint64_t device_base, std::byte* host_base) {
  std::vector<SegmentView> views;
  for (const SegmentShape& segment : shape.segments) {
    views.push_back({device_base + segment.device_offset, segment.bytes_per_block, shape.device_blocks,
                     host_base + segment.host_offset, segment.bytes_per_block, shape.host_blocks,
                     segment.bytes_per_block});
  }
  return views;
}

uint64_t block_seed(uint64_t chunk, uint64_t version, uint32_t rank, uint64_t segment, uint64_t block) {
  return mix64(mix64(mix64(mix64(chunk) ^ version) ^ rank) ^ (segment << 32 | block));
}

}  // namespace hugepin::demo
