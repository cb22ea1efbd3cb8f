// What a block copy is made of: per-tensor segment views and (source, destination) block pairs.
//
// A rank's KV cache is one or more GPU tensors; the planner splits each into segments (a K/V
// outer dimension makes two) and views each segment as [num_blocks, block_bytes]. The host
// region holds the same segments, each as [host_blocks, block_bytes]. A copy moves block `src`
// of every segment to block `dst` of the same segment, in one direction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace hugepin {

enum class Direction : uint8_t {
  kHostToDevice = 0,  // a load: host KV back to the GPU
  kDeviceToHost = 1,  // a store: GPU KV offloaded to the host
};

std::string_view direction_name(Direction direction);  // "h2d" / "d2h"

struct SegmentView {
  uint64_t device_base = 0;         // device address of block 0 of this segment
  uint64_t device_block_stride = 0; // bytes between consecutive device blocks
  uint64_t device_blocks = 0;       // blocks the device side holds
  std::byte* host_base = nullptr;   // host address of block 0 (inside a pinned region)
  uint64_t host_block_stride = 0;
  uint64_t host_blocks = 0;
  uint64_t block_bytes = 0;         // bytes copied per block: <= both strides
};

struct BlockPair {
  uint64_t src = 0;  // block index on the source side
  uint64_t dst = 0;  // block index on the destination side
};

// Checks a request before anything is enqueued: every view well formed (block_bytes > 0 and
// <= both strides), every pair in range on both sides, and, when `alignment` > 1, every base,
// stride and block_bytes a multiple of it. Throws Error naming the view or pair and the value.
void check_copy_request(std::span<const SegmentView> views, std::span<const BlockPair> pairs,
                        Direction direction, uint64_t alignment);

// Bytes a request moves: pairs * sum of block_bytes.
uint64_t copy_request_bytes(std::span<const SegmentView> views, std::span<const BlockPair> pairs);

}  // namespace hugepin
