// Extents of one region handed out first-fit, as the shim sub-allocates a rank's arena region.
//
// Pure bookkeeping over offsets [0, size): it never touches memory. Every extent starts and ends
// on a multiple of the alignment (the region's page size), so each can be registered with CUDA on
// its own. A freed extent merges with its free neighbours.
//
// Thread-safety: every method locks an internal mutex; one allocator may be shared by threads.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "base/mutex.h"

namespace hugepin {

struct Extent {
  uint64_t offset = 0;
  uint64_t length = 0;  // a multiple of the alignment
};

class RegionAllocator {
 public:
  // REQUIRES: alignment is a power of two and `size` a multiple of it; throws
  // std::invalid_argument otherwise.
  RegionAllocator(uint64_t size, uint64_t alignment);
  RegionAllocator(const RegionAllocator&) = delete;
  RegionAllocator& operator=(const RegionAllocator&) = delete;

  // The lowest free extent of `bytes` rounded up to the alignment; nullopt when bytes is 0 or no
  // free piece is large enough.
  std::optional<Extent> allocate(uint64_t bytes);
  // Gives back the extent that starts at `offset`. Returns false, changing nothing, when no
  // extent handed out starts there (a foreign offset or a second free).
  bool release(uint64_t offset);

  uint64_t size() const { return size_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t free_bytes() const;
  uint64_t largest_free() const;
  size_t free_pieces() const;
  size_t live_extents() const;

 private:
  const uint64_t size_;
  const uint64_t alignment_;
  mutable Mutex mutex_;
  std::map<uint64_t, uint64_t> free_ HUGEPIN_GUARDED_BY(mutex_);  // offset -> length; no two pieces touch
  std::map<uint64_t, uint64_t> live_ HUGEPIN_GUARDED_BY(mutex_);  // offset -> length of extents handed out
};

}  // namespace hugepin
