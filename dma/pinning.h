// Pinning a worker's region for its GPU: page-locked and mapped for the device, registered in
// chunks of at most 64 GiB (one registration of 512 GiB or more fails on current drivers), the
// chunks in parallel, with progress; a failure undoes every chunk already registered.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "dma/gpu_runtime.h"

namespace hugepin {

inline constexpr uint64_t kMaxPinChunkBytes = uint64_t{64} << 30;

struct PinOptions {
  int device = 0;
  // Largest registration; chunks start at multiples of it from the region's base. Values above
  // kMaxPinChunkBytes are lowered to it.
  uint64_t chunk_bytes = kMaxPinChunkBytes;
  // Registrations in flight at once (measured on the GPU host: docs/performance.md).
  unsigned threads = 4;
  // Chunk edges fall on multiples of this (the region's page size).
  uint64_t alignment = 4096;
};

// Called after each chunk is registered, from the registering thread, serialized.
using PinProgress = std::function<void(uint64_t bytes_pinned, uint64_t bytes_total)>;

// A pinned range. Move-only; unregisters every chunk when destroyed.
class PinnedRegion {
 public:
  PinnedRegion() = default;
  ~PinnedRegion();
  PinnedRegion(PinnedRegion&& other) noexcept;
  PinnedRegion& operator=(PinnedRegion&& other) noexcept;
  PinnedRegion(const PinnedRegion&) = delete;
  PinnedRegion& operator=(const PinnedRegion&) = delete;

  void* host() const { return base_; }
  // The device address of the region (mapped host memory), for the SM copy kernels.
  uint64_t device_address() const { return device_address_; }
  uint64_t bytes() const { return bytes_; }
  uint64_t chunk_bytes() const { return chunk_bytes_; }
  size_t chunks() const { return chunk_bases_.size(); }
  // Unregisters now. Throws Error naming the chunk when the runtime refuses.
  void unpin();

 private:
  friend PinnedRegion pin_region(GpuRuntime&, void*, uint64_t, const PinOptions&, const PinProgress&);

  GpuRuntime* runtime_ = nullptr;
  int device_ = 0;
  void* base_ = nullptr;
  uint64_t bytes_ = 0;
  uint64_t chunk_bytes_ = 0;
  uint64_t device_address_ = 0;
  std::vector<void*> chunk_bases_;
};

// The chunk layout pin_region uses: chunk size for `bytes` with these options (a multiple of the
// alignment, at most kMaxPinChunkBytes, small enough that every thread gets a chunk).
uint64_t pin_chunk_size(uint64_t bytes, const PinOptions& options);

// Pins [base, base + bytes). REQUIRES: base and bytes are multiples of options.alignment and
// bytes > 0; throws Error otherwise. Throws Error naming the chunk (offset, size), the runtime's
// error and the fix, after unregistering every chunk it had registered: on failure nothing stays
// pinned.
PinnedRegion pin_region(GpuRuntime& runtime, void* base, uint64_t bytes, const PinOptions& options,
                        const PinProgress& progress = {});

}  // namespace hugepin
