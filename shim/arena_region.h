// The region of this process's rank in a named arena, mapped and carved into extents of whole
// pages (shim/region_allocator.h); each extent is one allocation the shim hands out and the
// caller registers with CUDA on its own, as cudaHostAlloc memory would be.
//
// The region file is locked (an open-file-description write lock, base/file_locks.h, taken
// without waiting) for as long as this process maps it:
// two processes carving one region would hand out the same bytes, so the second one is refused
// and its requests go to CUDA. The lock goes with the process (exit, crash).
//
// This maps the region file by name (hugemem/arena.h open_region); attaching through the control
// segment (ipc/) replaces that later.
//
// Thread-safety: allocate and release may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/os.h"
#include "hugemem/region.h"
#include "shim/region_allocator.h"
#include "shim/shim_config.h"

namespace hugepin {

class ArenaRegion {
 public:
  // Maps and locks region config.rank of config.arena. Throws Fallback when the arena has no such
  // region, its control segment or region file is refused (base/trusted_file.h: a link, a FIFO,
  // another user's file), a worker has attached to the rank (its region holds KV: the shim never
  // takes it as free space), another process holds it, or (config.strict) it is on 4 KiB pages.
  static std::unique_ptr<ArenaRegion> open(Os& os, const ShimConfig& config);
  ArenaRegion(const ArenaRegion&) = delete;
  ArenaRegion& operator=(const ArenaRegion&) = delete;

  // An extent of `bytes` rounded up to the page; nullopt when no free piece is large enough.
  // *given receives the extent's length.
  std::optional<void*> allocate(uint64_t bytes, uint64_t* given);
  // Gives back the extent starting at `address`; false when none starts there.
  bool release(void* address);

  // "arena 'kv' rank 0 has no free piece of 3.00 GiB (2.00 GiB of 8.00 GiB free, the largest
  // piece 1.00 GiB)".
  std::string exhausted_message(uint64_t bytes) const;

  const std::string& arena() const { return arena_; }
  uint32_t rank() const { return rank_; }
  uint64_t page_size() const { return mapping_.page_size(); }
  uint64_t size() const { return mapping_.size(); }
  const std::string& path() const { return mapping_.path(); }

 private:
  ArenaRegion(std::string arena, uint32_t rank, MappedRegion mapping);

  std::string arena_;
  uint32_t rank_;
  MappedRegion mapping_;
  RegionAllocator allocator_;
};

}  // namespace hugepin
