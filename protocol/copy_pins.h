// Copy pins: how many in-flight copy jobs hold each chunk, and where each chunk is in its life.
//
// A chunk id names the same chunk on every rank (each rank has its own buffer of the plan's
// common chunk count). As the scheduler sees a chunk:
//
//   active --retire--> retired --fence passed--> fenced --last unpin--> reusable --take--> active
//                         \----------- fence passed with no holds ---------/
//
//   active    the engine owns it (free in its pool, or holding KV); copy jobs may pin it.
//   retired   the engine gave it up; GPU work of its epoch may still touch it (the fence is in
//             retirement_fence.h).
//   fenced    the fence passed, but a copy job still holds it.
//   reusable  nothing can touch it; waits for take_reusable(), which hands it back as active.
//
// Holds are counted per chunk: one per job per listing of the chunk. A hold may be quarantined:
// its job waits for a rank that stopped answering and whose process may still copy; such a
// chunk takes no new pins until the quarantine ends.
//
// Thread-safety: none. The scheduler is single-threaded (OffloadScheduler owns one CopyPins).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/contract.h"
#include "protocol/offload_types.h"

namespace hugepin {

enum class ChunkState : uint8_t { kActive = 0, kRetired = 1, kFenced = 2, kReusable = 3 };

const char* chunk_state_name(ChunkState state);

class CopyPins {
 public:
  // `chunks` chunks, all active and unpinned. Throws Error when `chunks` is 0.
  explicit CopyPins(uint32_t chunks);

  // Adds one hold to each listed chunk (a chunk listed twice gets two). All or nothing: throws
  // Error naming the first chunk that is out of range, not active, or quarantined, and then
  // pins nothing.
  void pin(std::span<const ChunkId> chunks);
  // Removes one hold from each listed chunk; a fenced chunk whose last hold goes becomes
  // reusable. All or nothing: throws Error naming a chunk that holds fewer than it is listed.
  void unpin(std::span<const ChunkId> chunks);

  // Marks one hold of each listed chunk as quarantined, or ends that. REQUIRES: each chunk has
  // more holds than quarantined holds (quarantine), or a quarantined hold (unquarantine);
  // throws Error otherwise, changing nothing.
  void quarantine(std::span<const ChunkId> chunks);
  void unquarantine(std::span<const ChunkId> chunks);

  // The engine gives up an active chunk. Throws Error naming the chunk and its state otherwise.
  void retire(ChunkId chunk) {
    check_range(chunk);
    Record& record = records_[chunk];
    if (record.state != ChunkState::kActive) throw_wrong_state("cannot retire", chunk, "not active (retired twice?)");
    record.state = ChunkState::kRetired;
    ++retired_;
  }
  // The fence passed for a retired chunk: reusable now if nothing holds it, else fenced until
  // the last unpin. Throws Error when the chunk is not retired.
  void fence_passed(ChunkId chunk) {
    check_range(chunk);
    Record& record = records_[chunk];
    if (record.state != ChunkState::kRetired) throw_wrong_state("fence passed for", chunk, "not retired");
    --retired_;
    if (record.holds == 0) {
      make_reusable(chunk);
    } else {
      record.state = ChunkState::kFenced;
      ++fenced_;
    }
  }

  // Appends every reusable chunk to `out` in the order they became reusable and makes each
  // active again. Each chunk is handed out once per retirement.
  void take_reusable(std::vector<ChunkId>* out);

  uint32_t chunks() const { return static_cast<uint32_t>(records_.size()); }
  // REQUIRES (these four): chunk < chunks().
  ChunkState state(ChunkId chunk) const { return checked_record(chunk).state; }
  uint32_t holds(ChunkId chunk) const { return checked_record(chunk).holds; }
  uint32_t quarantined_holds(ChunkId chunk) const { return checked_record(chunk).quarantined; }
  bool quarantined(ChunkId chunk) const { return checked_record(chunk).quarantined > 0; }

  // No chunk is held by any copy: a region may be unmapped as far as copies go.
  bool holds_clear() const { return total_holds_ == 0; }
  uint64_t total_holds() const { return total_holds_; }
  uint32_t pinned_chunks() const { return pinned_chunks_; }
  uint32_t quarantined_chunks() const { return quarantined_chunks_; }
  uint32_t retired_chunks() const { return retired_; }  // retired, fence not yet passed
  uint32_t fenced_chunks() const { return fenced_; }    // fence passed, still held
  uint32_t reusable_chunks() const { return static_cast<uint32_t>(reusable_.size()); }

 private:
  struct Record {
    uint32_t holds = 0;
    uint32_t quarantined = 0;  // holds whose job waits for a rank's exit
    ChunkState state = ChunkState::kActive;
  };

  const Record& checked_record(ChunkId chunk) const {
    HUGEPIN_REQUIRE(chunk < records_.size(), "chunk ", chunk, " of ", records_.size());
    return records_[chunk];
  }
  void check_range(ChunkId chunk) const {
    if (chunk >= records_.size()) throw_out_of_range(chunk);
  }
  [[noreturn]] void throw_out_of_range(ChunkId chunk) const;
  [[noreturn]] void throw_wrong_state(const char* what, ChunkId chunk, const char* why) const;
  void make_reusable(ChunkId chunk) {
    records_[chunk].state = ChunkState::kReusable;
    reusable_.push_back(chunk);
  }
  void undo_pin(std::span<const ChunkId> chunks);
  [[noreturn]] void refuse_pin(ChunkId chunk) const;
  void undo_unpin(std::span<const ChunkId> chunks);

  std::vector<Record> records_;
  std::vector<ChunkId> reusable_;  // capacity: every chunk, so no push reallocates
  uint64_t total_holds_ = 0;
  uint32_t pinned_chunks_ = 0;
  uint32_t quarantined_chunks_ = 0;
  uint32_t retired_ = 0;
  uint32_t fenced_ = 0;
};

}  // namespace hugepin
