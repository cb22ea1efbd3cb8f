#include "dma/copy_types.h"

#include <algorithm>
#include <cstdint>

#include "base/error.h"

namespace hugepin {

std::string_view direction_name(Direction direction) {
  return direction == Direction::kHostToDevice ? "h2d" : "d2h";
}

void check_copy_request(std::span<const SegmentView> views, std::span<const BlockPair> pairs,
                        Direction direction, uint64_t alignment) {
  if (views.empty()) throw Error("a copy needs at least one segment view");
  for (size_t v = 0; v < views.size(); ++v) {
    const SegmentView& view = views[v];
    if (view.block_bytes == 0) throw Error(cat("segment view ", v, ": block_bytes is 0"));
    if (view.block_bytes > view.device_block_stride || view.block_bytes > view.host_block_stride) {
      throw Error(cat("segment view ", v, ": block_bytes ", view.block_bytes, " exceeds its block stride (device ",
                      view.device_block_stride, ", host ", view.host_block_stride, ")"));
    }
    if (view.device_base == 0 || view.host_base == nullptr) throw Error(cat("segment view ", v, ": a base address is null"));
    if (alignment > 1) {
      const uint64_t host = reinterpret_cast<uintptr_t>(view.host_base);
      for (auto [what, value] : {std::pair<const char*, uint64_t>{"device_base", view.device_base},
                                 {"host_base", host},
                                 {"device_block_stride", view.device_block_stride},
                                 {"host_block_stride", view.host_block_stride},
                                 {"block_bytes", view.block_bytes}}) {
        if (value % alignment != 0) {
          throw Error(cat("segment view ", v, ": ", what, " ", value, " is not a multiple of ", alignment,
                          " bytes (this backend needs aligned blocks)"));
        }
      }
    }
  }
  const bool load = direction == Direction::kHostToDevice;
  // Every pair must fit every view. This runs on each launch, before anything is enqueued (262144
  // pairs for 1 GiB of 4 KiB blocks): one pass for the largest indices, which vectorizes, and the
  // pair-by-pair search only to name the first bad pair.
  uint64_t src_limit = UINT64_MAX;
  uint64_t dst_limit = UINT64_MAX;
  for (const SegmentView& view : views) {
    src_limit = std::min(src_limit, load ? view.host_blocks : view.device_blocks);
    dst_limit = std::min(dst_limit, load ? view.device_blocks : view.host_blocks);
  }
  uint64_t src_max = 0;
  uint64_t dst_max = 0;
  for (const BlockPair& pair : pairs) {
    src_max = std::max(src_max, pair.src);
    dst_max = std::max(dst_max, pair.dst);
  }
  if (pairs.empty() || (src_max < src_limit && dst_max < dst_limit)) return;
  for (size_t i = 0; i < pairs.size(); ++i) {
    for (size_t v = 0; v < views.size(); ++v) {
      const uint64_t view_src = load ? views[v].host_blocks : views[v].device_blocks;
      const uint64_t view_dst = load ? views[v].device_blocks : views[v].host_blocks;
      if (pairs[i].src >= view_src || pairs[i].dst >= view_dst) {
        throw Error(cat("block pair ", i, " (", pairs[i].src, " -> ", pairs[i].dst, ") is out of range for segment view ",
                        v, " (", direction_name(direction), ": ", view_src, " source blocks, ", view_dst,
                        " destination blocks)"));
      }
    }
  }
}

uint64_t copy_request_bytes(std::span<const SegmentView> views, std::span<const BlockPair> pairs) {
  uint64_t per_pair = 0;
  for (const SegmentView& view : views) per_pair += view.block_bytes;
  return per_pair * pairs.size();
}

}  // namespace hugepin
