// The SM copy kernels. Internal to dma/: included by cuda_copy_engine.cu only.
//
// Both walk the units of dma/copy_units.h with a fixed number of thread blocks (at most one SM
// each), so that copies leave the rest of the GPU to compute.
#pragma once

#include <cuda_runtime.h>

#include "dma/copy_units.h"

namespace hugepin::detail {

// Loads in flight per lane: 8 x 16 bytes, so a warp keeps 4 KiB moving.
constexpr int kLoadsInFlight = 8;

// Warp per unit; each lane moves 16-byte vectors, kLoadsInFlight of them loaded before any is
// stored. Streaming (evict-first) loads and stores: the data is touched once. The next unit's
// descriptor is looked up while the current unit's first loads are in flight, so that for small
// blocks (one unit each) the lookup's memory latency does not open a gap in the stream of loads.
__device__ __forceinline__ void load_store_units(const UnitLayout& layout, const UnitView* views,
                                                 const UnitPair* pairs) {
  const unsigned lane = threadIdx.x & 31u;
  const uint64_t warp = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const uint64_t warps = (static_cast<uint64_t>(gridDim.x) * blockDim.x) >> 5;
  const uint64_t units = layout.unit_count();
  if (warp >= units) return;
  CopyUnit next = copy_unit_at(layout, views, pairs, warp);
  for (uint64_t u = warp; u < units; u += warps) {
    const CopyUnit unit = next;
    // A unit is at most one piece (64 KiB): 32-bit indices keep registers for data.
    const uint32_t vectors = static_cast<uint32_t>(unit.bytes / 16);
    const uint4* src = reinterpret_cast<const uint4*>(unit.src) + lane;
    uint4* dst = reinterpret_cast<uint4*>(unit.dst) + lane;
    // `first` is the same in every lane, so all of them take the lookup below together (a lane
    // with nothing to move in a small unit still needs the next unit's descriptor).
    for (uint32_t first = 0; first == 0 || first < vectors; first += 32 * kLoadsInFlight) {
      uint4 r[kLoadsInFlight];
#pragma unroll
      for (int k = 0; k < kLoadsInFlight; ++k) {
        if (first + lane + k * 32 < vectors) r[k] = __ldcs(src + k * 32);
      }
      if (first == 0 && u + warps < units) next = copy_unit_at(layout, views, pairs, u + warps);
#pragma unroll
      for (int k = 0; k < kLoadsInFlight; ++k) {
        if (first + lane + k * 32 < vectors) __stcs(dst + k * 32, r[k]);
      }
      src += 32 * kLoadsInFlight;
      dst += 32 * kLoadsInFlight;
    }
  }
}

// --- Hopper bulk async copies (TMA, cp.async.bulk) --------------------------------------------

constexpr int kBulkStages = 4;
constexpr int kBulkMaxPipelines = 32;  // pipelines (warps) per thread block

__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

__device__ __forceinline__ void barrier_init(uint32_t barrier) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(barrier) : "memory");
}

// Arms `barrier` for `bytes` and starts the global -> shared copy that will complete it.
__device__ __forceinline__ void bulk_load(uint32_t barrier, uint32_t shared_dst, uint64_t global_src, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   shared_dst),
               "l"(global_src), "r"(bytes), "r"(barrier)
               : "memory");
}

__device__ __forceinline__ void barrier_wait(uint32_t barrier, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(barrier), "r"(parity)
        : "memory");
  } while (done == 0);
}

// Starts the shared -> global copy of a stage and closes it into its own bulk group.
__device__ __forceinline__ void bulk_store(uint64_t global_dst, uint32_t shared_src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(global_dst), "r"(shared_src),
               "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Waits until at most N bulk groups still read shared memory.
template <int N>
__device__ __forceinline__ void bulk_wait_reads() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// One pipeline per warp, driven by its lane 0: kBulkStages shared-memory stages of
// `stage_bytes`; each unit is loaded by the copy engine into a stage (completing an mbarrier),
// then stored from the stage; a stage is refilled once the store that used it has read it.
// REQUIRES: layout.piece_bytes <= stage_bytes; units 16-byte aligned, sizes multiples of 16 (device
// code: checked where the kernel is launched, in CudaCopyEngine::enqueue_sm).
__device__ __forceinline__ void bulk_copy_units(const UnitLayout& layout, const UnitView* views,
                                                const UnitPair* pairs, uint32_t stage_bytes) {
  extern __shared__ __align__(128) unsigned char stages[];
  __shared__ __align__(8) uint64_t barriers[kBulkMaxPipelines][kBulkStages];
  if ((threadIdx.x & 31u) != 0) return;
  const unsigned pipeline = threadIdx.x >> 5;
  const uint64_t pipelines = static_cast<uint64_t>(gridDim.x) * (blockDim.x >> 5);
  const uint64_t first = static_cast<uint64_t>(blockIdx.x) * (blockDim.x >> 5) + pipeline;
  const uint64_t units = layout.unit_count();
  unsigned char* buffer = stages + static_cast<size_t>(pipeline) * kBulkStages * stage_bytes;

  uint32_t barrier[kBulkStages];
  uint32_t slot[kBulkStages];
  for (int s = 0; s < kBulkStages; ++s) {
    barrier[s] = shared_address(&barriers[pipeline][s]);
    slot[s] = shared_address(buffer + static_cast<size_t>(s) * stage_bytes);
    barrier_init(barrier[s]);
  }
  // Makes the initialized barriers visible to the copy engine (the async proxy).
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");

  CopyUnit in_stage[kBulkStages];
  for (int s = 0; s < kBulkStages; ++s) {
    const uint64_t u = first + s * pipelines;
    if (u >= units) break;
    in_stage[s] = copy_unit_at(layout, views, pairs, u);
    bulk_load(barrier[s], slot[s], in_stage[s].src, static_cast<uint32_t>(in_stage[s].bytes));
  }
  for (uint64_t i = 0; first + i * pipelines < units; ++i) {
    const int s = static_cast<int>(i % kBulkStages);
    barrier_wait(barrier[s], static_cast<uint32_t>((i / kBulkStages) & 1u));
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    bulk_store(in_stage[s].dst, slot[s], static_cast<uint32_t>(in_stage[s].bytes));
    // Refill the stage of the previous unit once its store has read it (all but the store just
    // issued), so one store and the loads of the other stages stay in flight.
    if (i >= 1) {
      const uint64_t next = first + (i - 1 + kBulkStages) * pipelines;
      if (next < units) {
        const int p = static_cast<int>((i - 1) % kBulkStages);
        bulk_wait_reads<1>();
        in_stage[p] = copy_unit_at(layout, views, pairs, next);
        bulk_load(barrier[p], slot[p], in_stage[p].src, static_cast<uint32_t>(in_stage[p].bytes));
      }
    }
  }
  bulk_wait_all();
}

// The kernels, each in two forms: the pairs in device memory (uploaded before the kernel), or
// carried in the kernel's parameters (InlinePairs, for launches of up to kInlinePairs pairs),
// which need no upload at all. __grid_constant__ lets the kernel read them where they are.
// The largest parameter list, sm_bulk_inline_kernel's, within the 4 KiB every CUDA version takes.
static_assert(sizeof(UnitLayout) + sizeof(const UnitView*) + sizeof(InlinePairs) + sizeof(uint32_t) <= 4096);

__global__ void __launch_bounds__(1024) sm_load_store_kernel(UnitLayout layout, const UnitView* views,
                                                             const UnitPair* pairs) {
  load_store_units(layout, views, pairs);
}

__global__ void __launch_bounds__(1024) sm_load_store_inline_kernel(UnitLayout layout, const UnitView* views,
                                                                    const __grid_constant__ InlinePairs pairs) {
  load_store_units(layout, views, pairs.pairs);
}

__global__ void sm_bulk_kernel(UnitLayout layout, const UnitView* views, const UnitPair* pairs, uint32_t stage_bytes) {
  bulk_copy_units(layout, views, pairs, stage_bytes);
}

__global__ void sm_bulk_inline_kernel(UnitLayout layout, const UnitView* views,
                                      const __grid_constant__ InlinePairs pairs, uint32_t stage_bytes) {
  bulk_copy_units(layout, views, pairs.pairs, stage_bytes);
}

}  // namespace hugepin::detail
