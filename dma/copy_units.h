// How a block copy is cut into units of work for the SM copy kernels, shared by the host (which
// sizes the launch and tests the cut) and the device (which walks it). A unit is one piece of
// one block of one segment: at most `piece_bytes`, so that a large block spreads over many
// warps and a small one is one unit.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define HUGEPIN_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define HUGEPIN_HOST_DEVICE inline
#endif

namespace hugepin {

// One segment, oriented for one direction: source and destination already chosen.
struct UnitView {
  uint64_t src_base;
  uint64_t src_stride;
  uint64_t dst_base;
  uint64_t dst_stride;
  uint64_t block_bytes;
  uint64_t first_piece;  // pieces of the views before this one, per block pair
};

struct UnitPair {
  uint64_t src;
  uint64_t dst;
};

// The pairs of a small launch, passed to the kernel by value (in its parameters): 3840 bytes,
// so that a kernel's whole parameter list stays under the 4 KiB that every CUDA version takes
// (checked in dma/cuda_copy_kernels.cuh).
inline constexpr uint32_t kInlinePairs = 240;
struct InlinePairs {
  UnitPair pairs[kInlinePairs];
};

// How a launch of `count` pairs (count > 0) whose pairs travel in the kernels' parameters is cut:
// into as many kernels as `per_kernel` (at least 1) asks and enough that none carries more than
// kInlinePairs, in even shares (256 pairs go as two kernels of 128, not 240 and a tail of 16).
// Kernel k of carried_kernels() takes the pairs [carried_share_first(count, kernels, k),
// carried_share_first(count, kernels, k + 1)).
HUGEPIN_HOST_DEVICE uint64_t carried_kernels(uint64_t count, uint64_t per_kernel) {
  const uint64_t by_slice = (count + per_kernel - 1) / per_kernel;
  const uint64_t by_size = (count + kInlinePairs - 1) / kInlinePairs;
  return by_slice > by_size ? by_slice : by_size;
}
HUGEPIN_HOST_DEVICE uint64_t carried_share_first(uint64_t count, uint64_t kernels, uint64_t k) {
  return count * k / kernels;
}

struct UnitLayout {
  uint32_t view_count;
  uint64_t piece_bytes;      // a multiple of 16
  uint64_t pieces_per_pair;  // sum over views of ceil(block_bytes / piece_bytes)
  uint64_t pair_count;

  HUGEPIN_HOST_DEVICE uint64_t unit_count() const { return pieces_per_pair * pair_count; }
};

struct CopyUnit {
  uint64_t src;
  uint64_t dst;
  uint64_t bytes;
};

HUGEPIN_HOST_DEVICE uint64_t pieces_of(uint64_t block_bytes, uint64_t piece_bytes) {
  return (block_bytes + piece_bytes - 1) / piece_bytes;
}

// Unit `u` (< layout.unit_count()): which bytes go where.
HUGEPIN_HOST_DEVICE CopyUnit copy_unit_at(const UnitLayout& layout, const UnitView* views, const UnitPair* pairs,
                                          uint64_t u) {
  const uint64_t pair_index = u / layout.pieces_per_pair;
  const uint64_t rest = u - pair_index * layout.pieces_per_pair;
  // The last view whose first piece is <= rest; views are few, a binary search keeps it cheap.
  uint32_t lo = 0;
  uint32_t hi = layout.view_count - 1;
  while (lo < hi) {
    uint32_t mid = (lo + hi + 1) / 2;
    if (views[mid].first_piece <= rest) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const UnitView& view = views[lo];
  const uint64_t offset = (rest - view.first_piece) * layout.piece_bytes;
  const uint64_t left = view.block_bytes - offset;
  const UnitPair pair = pairs[pair_index];
  return {view.src_base + pair.src * view.src_stride + offset, view.dst_base + pair.dst * view.dst_stride + offset,
          left < layout.piece_bytes ? left : layout.piece_bytes};
}

}  // namespace hugepin
