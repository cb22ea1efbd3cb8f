// The KV cache policy of the CLI's miniature engines (`hugepin demo`, `hugepin bench offload`):
// which host chunks are free, stored, busy or on their way back through the fence, and which GPU
// slots (blocks_per_chunk device blocks each) are free. This is what an engine's KV manager
// decides; hugepin's SchedulerSession only pins, counts reports and fences.
//
// Thread-safety: none; the scheduler's thread owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "protocol/offload_types.h"

namespace hugepin::cli {

enum class CacheOp : uint32_t {
  kLoad = 0,     // host -> GPU: reads stored chunks into GPU slots
  kStore = 1,    // GPU -> host: writes free chunks from GPU slots
  kSpill = 2,    // host -> disk: reads stored chunks
  kRestore = 3,  // disk -> host: rewrites stored chunks whose disk copy is current
};

// What the scheduler pins for `op`: reads hold chunks as loads, writes as stores.
JobKind job_kind(CacheOp op);

struct CacheJob {
  CacheOp op = CacheOp::kLoad;
  std::vector<ChunkId> chunks;
  std::vector<uint64_t> versions;  // per chunk: a store's new version, else the one expected
  std::vector<uint64_t> slots;     // per chunk for loads and stores; empty for the disk tier
};

class ChunkCache {
 public:
  ChunkCache(uint64_t chunks, uint64_t gpu_slots, uint64_t seed);

  // Takes `count` chunks for `op` and, for loads and stores, as many GPU slots: free chunks for a
  // store (each gets a new version), random stored chunks `op` may take now for the rest (a
  // restore wants at least 1, a load `count`). nullopt when not enough are available.
  std::optional<CacheJob> begin(CacheOp op, uint32_t count);
  // The job reached quorum: its chunks are stored (a store) or idle again, its slots free.
  void completed(const CacheJob& job);
  // The job failed: its slots come back once the all-rank epoch reaches `epoch` (copies sent
  // before that epoch closed are over then); returns the chunks to retire (a failed store or
  // restore leaves them half written).
  std::vector<ChunkId> failed(const CacheJob& job, Epoch epoch);
  // Idle stored chunks to retire, oldest first, until free and retiring chunks reach `want_free`.
  std::vector<ChunkId> evict(size_t want_free);
  // A retired chunk came back (reusable): free again. Returns how long it was away, in ms.
  double reusable(ChunkId chunk);
  // Slots held by failed jobs whose epoch the all-rank epoch has reached are free again.
  void epoch_released(Epoch all_rank_epoch);

  // The version of chunk `chunk`'s last completed store, or nullopt when it holds none now.
  std::optional<uint64_t> stored_version(ChunkId chunk) const;
  size_t stored() const { return stored_.size(); }
  size_t free() const { return free_.size(); }

 private:
  enum class State : uint8_t { kFree, kStoring, kStored, kRetired };
  struct Chunk {
    State state = State::kFree;
    uint64_t version = 0;   // of the last store that completed
    uint32_t busy = 0;      // jobs reading its host copy (loads, spills)
    bool exclusive = false; // a restore is writing its host copy
    uint64_t on_disk = 0;   // the version spilled to disk (0: none)
    std::chrono::steady_clock::time_point retired_at;
  };

  bool may_take(CacheOp op, const Chunk& chunk) const;
  void retire(ChunkId chunk);

  std::vector<Chunk> chunks_;
  std::deque<ChunkId> free_;
  std::vector<ChunkId> stored_;
  size_t retiring_ = 0;
  std::deque<uint64_t> slots_;
  std::deque<std::pair<Epoch, std::vector<uint64_t>>> held_slots_;
  uint64_t version_ = 0;
  std::mt19937_64 random_;
};

}  // namespace hugepin::cli
