#include "session/chunk_geometry.h"

#include <cerrno>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "planner/checked_math.h"

namespace hugepin {
namespace {

using planner::checked_add;
using planner::checked_mul;

// Each rank's segment sizes per block, as the planner split its storages.
std::vector<uint64_t> plan_segments(const planner::RankPlan& rank) {
  std::vector<uint64_t> segments;
  for (const planner::StorageLayout& storage : rank.layout.storages) {
    for (uint64_t s = 0; s < storage.segments; ++s) segments.push_back(storage.segment_bytes_per_block);
  }
  if (segments.empty()) segments.push_back(rank.payload_bytes_per_block);  // bytes_per_block given directly
  return segments;
}

// The same read back from the plan text an arena's control segment keeps (planner/plan_json.h).
std::vector<std::vector<uint64_t>> plan_text_segments(const ArenaLayout& layout) {
  const uint32_t ranks = layout.tp * layout.pp;
  std::vector<std::vector<uint64_t>> segments(ranks);
  nlohmann::json plan = nlohmann::json::parse(layout.plan_json, nullptr, /*allow_exceptions=*/false);
  if (!plan.is_object() || !plan.contains("ranks") || !plan["ranks"].is_array()) {
    throw Error("the arena's plan text is not a plan (no \"ranks\" array)", EINVAL);
  }
  try {
    for (const nlohmann::json& rank : plan["ranks"]) {
      const uint32_t flat = rank.at("rank").get<uint32_t>();
      if (flat >= ranks) throw Error(cat("the arena's plan names rank ", flat, " of ", ranks), EINVAL);
      for (const nlohmann::json& storage : rank.at("storages")) {
        const uint64_t count = storage.at("segments").get<uint64_t>();
        const uint64_t bytes = storage.at("segment_bytes_per_block").get<uint64_t>();
        if (count > 4096) throw Error(cat("the arena's plan gives rank ", flat, " ", count, " segments"), EINVAL);
        segments[flat].insert(segments[flat].end(), count, bytes);
      }
    }
  } catch (const nlohmann::json::exception& error) {
    throw Error(cat("the arena's plan text does not parse: ", error.what()), EINVAL);
  }
  return segments;
}

}  // namespace

ChunkGeometry::ChunkGeometry(uint32_t tp, uint32_t pp, uint64_t chunk_count, uint64_t blocks_per_chunk,
                             const std::vector<std::vector<uint64_t>>& segment_bytes)
    : tp_(tp), pp_(pp), chunk_count_(chunk_count), blocks_per_chunk_(blocks_per_chunk) {
  if (tp == 0 || pp == 0) throw Error(cat("tp = ", tp, ", pp = ", pp, ": both must be at least 1"), EINVAL);
  if (uint64_t{tp} * pp != segment_bytes.size()) {
    throw Error(cat("tp ", tp, " x pp ", pp, " ranks, but ", segment_bytes.size(), " ranks described"), EINVAL);
  }
  if (chunk_count == 0 || chunk_count > kMaxChunkCount) {
    throw Error(cat("chunk_count = ", chunk_count, ": must be 1 to ", kMaxChunkCount,
                    " (chunk ids are 32-bit; use larger chunks: raise blocks_per_chunk)"), EINVAL);
  }
  if (blocks_per_chunk == 0) throw Error("blocks_per_chunk = 0: must be at least 1", EINVAL);
  const uint64_t blocks = checked_mul(chunk_count, blocks_per_chunk, "host blocks");
  for (uint32_t r = 0; r < segment_bytes.size(); ++r) {
    RankGeometry rank{r, r % tp, r / tp, {}, 0, 0};
    if (segment_bytes[r].empty()) throw Error(cat("rank ", r, " has no KV segment"), EINVAL);
    for (size_t s = 0; s < segment_bytes[r].size(); ++s) {
      const uint64_t bytes = segment_bytes[r][s];
      if (bytes == 0) throw Error(cat("rank ", r, " segment ", s, ": bytes_per_block = 0"), EINVAL);
      rank.segments.push_back({bytes, rank.host_bytes, bytes});
      rank.host_bytes = checked_add(rank.host_bytes, checked_mul(blocks, bytes, "segment bytes"), "region bytes");
      rank.payload_bytes_per_block = checked_add(rank.payload_bytes_per_block, bytes, "payload per block");
    }
    ranks_.push_back(std::move(rank));
  }
}

ChunkGeometry ChunkGeometry::of_plan(const planner::CapacityPlan& plan) {
  std::vector<std::vector<uint64_t>> segments;
  for (const planner::RankPlan& rank : plan.ranks) segments.push_back(plan_segments(rank));
  return ChunkGeometry(plan.tp, plan.pp, plan.chunk_count, plan.blocks_per_chunk, segments);
}

ChunkGeometry ChunkGeometry::of_layout(const ArenaLayout& layout) {
  std::vector<std::vector<uint64_t>> segments(uint64_t{layout.tp} * layout.pp);
  if (!layout.plan_json.empty()) segments = plan_text_segments(layout);
  for (const RankRegionLayout& rank : layout.ranks) {
    const uint32_t flat = flat_rank_of(layout, rank);
    if (flat >= segments.size()) throw Error(cat("the arena records rank ", flat, " of ", segments.size()), EINVAL);
    std::vector<uint64_t>& mine = segments[flat];
    if (mine.empty()) mine.push_back(rank.payload_bytes_per_block);
    uint64_t sum = 0;
    for (uint64_t bytes : mine) sum += bytes;
    if (sum != rank.payload_bytes_per_block) {
      throw Error(cat("rank ", flat, ": the arena's plan gives ", sum, " bytes per block, its record ",
                      rank.payload_bytes_per_block), EINVAL);
    }
  }
  return ChunkGeometry(layout.tp, layout.pp, layout.chunk_count, layout.blocks_per_chunk, segments);
}

uint64_t ChunkGeometry::host_block(uint64_t chunk, uint64_t block) const {
  if (chunk >= chunk_count_) throw Error(cat("chunk ", chunk, " is out of range (the arena has ", chunk_count_, ")"), ERANGE);
  if (block >= blocks_per_chunk_) {
    throw Error(cat("block ", block, " of a chunk is out of range (", blocks_per_chunk_, " per chunk)"), ERANGE);
  }
  return chunk * blocks_per_chunk_ + block;
}

uint64_t ChunkGeometry::chunk_segment_bytes(uint32_t rank, size_t segment) const {
  return blocks_per_chunk_ * ranks_.at(rank).segments.at(segment).bytes_per_block;
}

uint64_t ChunkGeometry::chunk_bytes(uint32_t rank) const {
  return blocks_per_chunk_ * ranks_.at(rank).payload_bytes_per_block;
}

uint64_t ChunkGeometry::chunk_bytes_all_ranks() const {
  uint64_t bytes = 0;
  for (uint32_t r = 0; r < ranks(); ++r) bytes += chunk_bytes(r);
  return bytes;
}

uint64_t ChunkGeometry::host_block_offset(uint32_t rank, size_t segment, uint64_t chunk, uint64_t block) const {
  const SegmentGeometry& geometry = ranks_.at(rank).segments.at(segment);
  return geometry.host_offset + host_block(chunk, block) * geometry.host_block_stride;
}

void ChunkGeometry::append_chunk_pairs(Direction direction, uint64_t chunk, uint64_t gpu_first_block,
                                       std::vector<BlockPair>* pairs) const {
  const uint64_t first = host_block(chunk, 0);
  for (uint64_t b = 0; b < blocks_per_chunk_; ++b) {
    pairs->push_back(direction == Direction::kDeviceToHost ? BlockPair{gpu_first_block + b, first + b}
                                                           : BlockPair{first + b, gpu_first_block + b});
  }
}

void ChunkGeometry::append_job_pairs(Direction direction, std::span<const ChunkId> chunks,
                                     std::span<const uint64_t> gpu_blocks, std::vector<BlockPair>* pairs) const {
  if (gpu_blocks.size() != chunks.size() * blocks_per_chunk_) {
    throw Error(cat(gpu_blocks.size(), " device blocks for ", chunks.size(), " chunks of ", blocks_per_chunk_,
                    " blocks: need ", chunks.size() * blocks_per_chunk_), EINVAL);
  }
  for (size_t i = 0; i < chunks.size(); ++i) {
    const uint64_t first = host_block(chunks[i], 0);
    for (uint64_t b = 0; b < blocks_per_chunk_; ++b) {
      const uint64_t gpu = gpu_blocks[i * blocks_per_chunk_ + b];
      pairs->push_back(direction == Direction::kDeviceToHost ? BlockPair{gpu, first + b} : BlockPair{first + b, gpu});
    }
  }
}

std::vector<SegmentView> ChunkGeometry::segment_views(uint32_t rank, std::byte* host_base,
                                                      std::span<const DeviceSegment> device) const {
  const RankGeometry& mine = ranks_.at(rank);
  if (device.size() != mine.segments.size()) {
    throw Error(cat("rank ", rank, " has ", mine.segments.size(), " KV segments in the arena; ", device.size(),
                    " device segments given"), EINVAL);
  }
  std::vector<SegmentView> views;
  for (size_t s = 0; s < device.size(); ++s) {
    const SegmentGeometry& host = mine.segments[s];
    const DeviceSegment& gpu = device[s];
    if (gpu.bytes_per_block != host.bytes_per_block) {
      throw Error(cat("device segment ", s, ": bytes_per_block = ", gpu.bytes_per_block, ", but the arena holds ",
                      host.bytes_per_block, " per block in that segment of rank ", rank), EINVAL);
    }
    if (gpu.block_stride < gpu.bytes_per_block || gpu.blocks == 0 || gpu.device_base == 0) {
      throw Error(cat("device segment ", s, ": base ", gpu.device_base, ", block_stride ", gpu.block_stride, ", blocks ",
                      gpu.blocks, ": need a base, at least one block and a stride of at least ", gpu.bytes_per_block),
                  EINVAL);
    }
    views.push_back({gpu.device_base, gpu.block_stride, gpu.blocks, host_base + host.host_offset,
                     host.host_block_stride, host_blocks(), host.bytes_per_block});
  }
  return views;
}

}  // namespace hugepin
