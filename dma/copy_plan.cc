#include "dma/copy_plan.h"

#include <algorithm>

#include "base/contract.h"

namespace hugepin {
namespace {

struct Side {
  uint64_t base;
  uint64_t stride;
};

// Appends [src, src + bytes) -> dst, cut where the host side crosses a split boundary.
void append_split(std::vector<CopySpan>& spans, CopySpan span, bool host_is_src, uint64_t split_base,
                  uint64_t split_bytes) {
  if (split_bytes == 0) {
    spans.push_back(span);
    return;
  }
  while (span.bytes > 0) {
    uint64_t host = host_is_src ? span.src : span.dst;
    uint64_t into_chunk = (host - split_base) % split_bytes;
    uint64_t take = std::min(span.bytes, split_bytes - into_chunk);
    spans.push_back({span.dst, span.src, take});
    span.dst += take;
    span.src += take;
    span.bytes -= take;
  }
}

}  // namespace

std::vector<CopySpan> plan_dma_spans(std::span<const SegmentView> views, std::span<const BlockPair> pairs,
                                     Direction direction, uint64_t host_split_base, uint64_t host_split_bytes,
                                     bool merge) {
  const bool load = direction == Direction::kHostToDevice;
  std::vector<CopySpan> spans;
  spans.reserve(pairs.size());
  for (const SegmentView& view : views) {
    const uint64_t host = reinterpret_cast<uintptr_t>(view.host_base);
    Side src = load ? Side{host, view.host_block_stride} : Side{view.device_base, view.device_block_stride};
    Side dst = load ? Side{view.device_base, view.device_block_stride} : Side{host, view.host_block_stride};
    // Runs can merge only when blocks touch on both sides.
    const bool mergeable = merge && src.stride == view.block_bytes && dst.stride == view.block_bytes;
    CopySpan run{};
    for (const BlockPair& pair : pairs) {
      CopySpan next{dst.base + pair.dst * dst.stride, src.base + pair.src * src.stride, view.block_bytes};
      if (mergeable && run.bytes > 0 && next.src == run.src + run.bytes && next.dst == run.dst + run.bytes) {
        run.bytes += next.bytes;
        continue;
      }
      if (run.bytes > 0) append_split(spans, run, load, host_split_base, host_split_bytes);
      run = next;
    }
    if (run.bytes > 0) append_split(spans, run, load, host_split_base, host_split_bytes);
  }
  return spans;
}

std::vector<UnitView> plan_unit_views(std::span<const SegmentView> views, Direction direction, uint64_t piece_bytes,
                                      uint64_t* pieces_per_pair) {
  HUGEPIN_REQUIRE(piece_bytes > 0 && piece_bytes % 16 == 0, "piece_bytes ", piece_bytes);
  const bool load = direction == Direction::kHostToDevice;
  std::vector<UnitView> out;
  uint64_t first = 0;
  for (const SegmentView& view : views) {
    const uint64_t host = reinterpret_cast<uintptr_t>(view.host_base);
    UnitView unit{};
    unit.src_base = load ? host : view.device_base;
    unit.src_stride = load ? view.host_block_stride : view.device_block_stride;
    unit.dst_base = load ? view.device_base : host;
    unit.dst_stride = load ? view.device_block_stride : view.host_block_stride;
    unit.block_bytes = view.block_bytes;
    unit.first_piece = first;
    first += pieces_of(view.block_bytes, piece_bytes);
    out.push_back(unit);
  }
  *pieces_per_pair = first;
  return out;
}

}  // namespace hugepin
