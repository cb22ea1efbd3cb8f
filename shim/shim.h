// The shim's policy, apart from the C entry points (interpose.cc): which requests it serves,
// from where, what it tracks, and how it gives memory back.
//
// A request of at least config.min_bytes is served from the arena region of this process's rank
// (config.arena) or a private hugepage mapping, registered through the caller's API (PinApi).
// Every failure on that path releases what it took and returns null, after one warning line per
// cause: the caller then passes the request to CUDA, so the shim never makes a call fail that
// would have succeeded without it.
//
// Every allocation handed out is tracked (address -> bytes asked and given, flags, API) and
// published in this process's allocation table (shim/table_writer.h). Freed addresses are
// remembered (the last kFreedMemory of them) until CUDA hands the address out again, so a second
// free is told apart from a foreign pointer.
//
// Thread-safety: every method may be called from any thread. The mutex is never held across a
// CUDA call or a prefault (the methods that make them exclude it: base/thread_annotations.h, which
// clang checks). Forking is safe: a child forgets its parent's allocations, table and arena region
// (they belong to the parent) and starts afresh on its first request.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>

#include "base/mutex.h"
#include "base/os.h"
#include "shim/arena_region.h"
#include "shim/pin_api.h"
#include "shim/private_mapping.h"
#include "shim/shim_config.h"
#include "shim/table_writer.h"

namespace hugepin {

class Shim {
 public:
  static constexpr size_t kFreedMemory = 4096;
  // Larger requests go to CUDA: one registration of 512 GiB or more fails on current drivers
  // (DESIGN.md), and registering in chunks would make copies across chunk edges fail. Rounded up
  // to a 1 GiB page, a request of this size is still one page short of that.
  static constexpr uint64_t kMaxRequest = uint64_t{511} << 30;

  // `os` reads the pool, mounts and PCI devices (rooted at config.sysroot); the allocation table
  // is always written through the real kernel.
  Shim(Os& os, ShimConfig config);
  Shim(const Shim&) = delete;
  Shim& operator=(const Shim&) = delete;

  const ShimConfig& config() const { return config_; }

  // Serves `bytes` asked through `entry` ("cudaHostAlloc") with `flags` as the caller gave them.
  // Returns the memory, registered through `api`; null when the request is for CUDA instead.
  void* serve(const char* entry, uint64_t bytes, uint32_t flags, PinApi& api) HUGEPIN_EXCLUDES(mutex_);

  enum class Freed { kReleased, kNotOurs, kFreedBefore };
  struct ReleaseResult {
    Freed freed = Freed::kNotOurs;
    int code = 0;  // with kReleased: 0, or the error unregistering returned
  };
  // Frees a shim allocation: unregisters it through the API that registered it and gives its
  // memory back. kNotOurs for an address the shim did not hand out (the caller passes it to
  // CUDA); kFreedBefore for one it handed out and took back already.
  ReleaseResult release(void* address) HUGEPIN_EXCLUDES(mutex_);

  // True when `address` lies inside an allocation the shim holds now.
  bool holds(const void* address) HUGEPIN_EXCLUDES(mutex_);
  // The flags the allocation holding `address` was asked with.
  std::optional<uint32_t> flags_of(const void* address) HUGEPIN_EXCLUDES(mutex_);
  // CUDA handed out `address`: it no longer names a freed shim allocation.
  void note_cuda_allocation(const void* address) HUGEPIN_EXCLUDES(mutex_);

  size_t live_allocations() HUGEPIN_EXCLUDES(mutex_);

  // pthread_atfork hooks: the mutex is held across fork, and the child starts afresh.
  void before_fork() HUGEPIN_ACQUIRE(mutex_);
  void after_fork_in_parent() HUGEPIN_RELEASE(mutex_);
  void after_fork_in_child() HUGEPIN_RELEASE(mutex_);

 private:
  struct Allocation {
    uint64_t bytes_asked = 0;
    uint64_t bytes_given = 0;
    uint64_t page_size = 0;
    int node = -1;
    uint32_t flags = 0;
    PinApi* api = nullptr;
    bool in_arena = false;
    int slot = -1;  // in the allocation table; -1 when unpublished
  };
  struct Backing {
    void* address = nullptr;
    uint64_t bytes = 0;
    uint64_t page_size = 0;
    int node = -1;
    bool in_arena = false;
  };

  Backing take_backing(uint64_t bytes, int gpu_node) HUGEPIN_EXCLUDES(mutex_);  // throws Fallback
  void give_back(const Backing& backing) HUGEPIN_EXCLUDES(mutex_);
  int gpu_node(PinApi& api) HUGEPIN_EXCLUDES(mutex_);  // throws Fallback (strict only)
  // Throws Fallback, having given the extent back.
  void place_extent(Backing& backing, int gpu_node) HUGEPIN_EXCLUDES(mutex_);
  void record(const Backing& backing, uint64_t bytes_asked, uint32_t flags, PinApi& api) HUGEPIN_EXCLUDES(mutex_);
  void publish(uintptr_t address, Allocation& allocation) HUGEPIN_REQUIRES_LOCK(mutex_);
  void remember_freed(uintptr_t address) HUGEPIN_REQUIRES_LOCK(mutex_);
  void start_afresh_if_forked() HUGEPIN_REQUIRES_LOCK(mutex_);
  std::map<uintptr_t, Allocation>::iterator find_holding(const void* address) HUGEPIN_REQUIRES_LOCK(mutex_);

  Os& os_;
  const ShimConfig config_;
  Mutex mutex_;
  pid_t pid_ HUGEPIN_GUARDED_BY(mutex_);
  bool forked_ HUGEPIN_GUARDED_BY(mutex_) = false;
  std::map<uintptr_t, Allocation> live_ HUGEPIN_GUARDED_BY(mutex_);
  std::unordered_set<uintptr_t> freed_ HUGEPIN_GUARDED_BY(mutex_);
  std::deque<uintptr_t> freed_order_ HUGEPIN_GUARDED_BY(mutex_);
  std::unique_ptr<ArenaRegion> arena_ HUGEPIN_GUARDED_BY(mutex_);
  // Monotonic; see ArenaRegion's claim (shim/arena_region.cc).
  int64_t arena_locked_until_ns_ HUGEPIN_GUARDED_BY(mutex_) = 0;
  static constexpr int64_t kLockedRetryNs = 30'000'000'000;
  std::unique_ptr<TableWriter> table_ HUGEPIN_GUARDED_BY(mutex_);
  std::map<std::string, int> gpu_nodes_ HUGEPIN_GUARDED_BY(mutex_);  // PCI address -> NUMA node
};

}  // namespace hugepin
