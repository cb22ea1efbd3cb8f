// Turning a block copy into what each backend consumes: DMA spans with contiguous runs merged,
// or SM-kernel units. Pure functions, tested on any machine.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dma/copy_types.h"
#include "dma/copy_units.h"

namespace hugepin {

struct CopySpan {
  uint64_t dst = 0;
  uint64_t src = 0;
  uint64_t bytes = 0;
};

// The spans of a copy, one per (pair, view), merged where consecutive pairs continue a run on
// both sides (src and dst each advance by one block and the blocks touch). Pairs are taken in the
// given order: engines hand runs in order, and sorting here would cost more than it saves.
// When `host_split_bytes` > 0, no span crosses a multiple of it from `host_split_base` on the
// host side: separately pinned chunks of a region are separate registrations for the driver.
// With `merge` false every (pair, view) is its own span: one copy per block, as engines do today.
std::vector<CopySpan> plan_dma_spans(std::span<const SegmentView> views, std::span<const BlockPair> pairs,
                                     Direction direction, uint64_t host_split_base = 0,
                                     uint64_t host_split_bytes = 0, bool merge = true);

// The views of a copy oriented for `direction`, with their first pieces, for the SM kernels.
// REQUIRES: piece_bytes > 0 and a multiple of 16.
std::vector<UnitView> plan_unit_views(std::span<const SegmentView> views, Direction direction, uint64_t piece_bytes,
                                      uint64_t* pieces_per_pair);

}  // namespace hugepin
