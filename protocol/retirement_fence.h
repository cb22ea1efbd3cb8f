// The retirement fence: a retired chunk may be reused only after every rank has finished the
// GPU work of the epoch it was retired in (the ordered all-rank compute-release barrier).
//
// Epochs: the scheduler's current epoch starts at 1; begin_epoch() closes it and opens the next.
// A rank reports compute-release(e) once all of its GPU work of epochs <= e is done; e must be a
// closed epoch (below the current one) and above the rank's previous release. The all-rank
// epoch is the minimum release over member ranks (current - 1 when there are none). A chunk
// retired during epoch E is stamped E and passes the fence when the all-rank epoch reaches E.
//
// Members: every rank at first. A rank that stops answering stays a member (its GPU may still
// run work of old epochs) until leave() says its process is gone; a replacement join()s at
// current - 1: it ran nothing of the closed epochs.
//
// Waived barrier (synchronous execution: a step returns only when its GPU work is done), chunks
// are stamped 0 and pass at once; releases are still checked and recorded.
//
// Cost: release() is O(1) amortized and never allocates. Member ranks are counted per epoch in a
// power-of-two ring covering [all-rank epoch, current epoch); the minimum only moves forward, and
// each step of it is paid for by an epoch that begin_epoch() opened. begin_epoch() grows the ring
// when the slowest member falls further behind than it covers (rare; amortized).
//
// Thread-safety: none. The scheduler is single-threaded (OffloadScheduler owns one).
#pragma once

#include <cstdint>
#include <vector>

#include "base/contract.h"
#include "protocol/offload_types.h"

namespace hugepin {

enum class ComputeBarrier : uint8_t {
  kRequired = 0,  // queued execution: retired chunks wait for every rank's compute-release
  kWaived = 1,    // synchronous execution: the step already waited for the GPU
};

class RetirementFence {
 public:
  // REQUIRES: 1 <= ranks <= kMaxRanks, chunks >= 1. Throws Error otherwise.
  RetirementFence(uint32_t ranks, uint32_t chunks, ComputeBarrier barrier);

  Epoch current_epoch() const { return current_; }
  // Every member rank has released this epoch (current - 1 when there are no members).
  Epoch all_rank_epoch() const { return min_; }
  ComputeBarrier barrier() const { return barrier_; }

  // Closes the current epoch; returns the new current epoch.
  Epoch begin_epoch();

  // Stamps `chunk` with the current epoch (0 when the barrier is waived) and queues it behind
  // earlier retirements. REQUIRES: chunk < chunks and not queued (the caller retires a chunk
  // once per life; CopyPins enforces that). Throws Error when it is.
  void retire(ChunkId chunk) {
    if (chunk >= stamps_.size() || queued_flag_[chunk]) refuse_retire(chunk);
    Epoch stamp = barrier_ == ComputeBarrier::kWaived ? 0 : current_;
    size_t tail = head_ + queued_;
    if (tail >= queue_.size()) tail -= queue_.size();
    queue_[tail] = Entry{chunk, stamp};
    stamps_[chunk] = stamp;
    queued_flag_[chunk] = 1;
    ++queued_;
  }
  // The oldest queued chunk has passed: all_rank_epoch() >= its stamp.
  bool front_passed() const { return queued_ > 0 && queue_[head_].stamp <= min_; }
  // Removes and returns the oldest queued chunk. REQUIRES: front_passed(); throws Error
  // otherwise.
  ChunkId pop_passed() {
    if (!front_passed()) throw_nothing_passed();
    ChunkId chunk = queue_[head_].chunk;
    if (++head_ == queue_.size()) head_ = 0;
    --queued_;
    queued_flag_[chunk] = 0;
    return chunk;
  }
  // Queued chunks (retired, fence not yet passed).
  uint32_t waiting() const { return queued_; }
  // The stamp a queued chunk was retired with. REQUIRES: chunk is queued.
  Epoch stamp(ChunkId chunk) const {
    HUGEPIN_REQUIRE(chunk < stamps_.size() && queued_flag_[chunk], "chunk ", chunk, " of ", stamps_.size());
    return stamps_[chunk];
  }

  // Rank `rank` finished all GPU work of epochs <= epoch. kApplied; kEpochNotAdvancing when
  // epoch <= its previous release; kEpochNotClosed when epoch >= current_epoch(). A rejection
  // changes nothing. REQUIRES: rank < ranks and is a member.
  ReportVerdict release(uint32_t rank, Epoch epoch);
  // The rank's process is gone: it no longer holds back the all-rank epoch. No-op for a
  // non-member. REQUIRES: rank < ranks.
  void leave(uint32_t rank);
  // A replacement for a departed rank: a member released through current - 1. No-op for a
  // member. REQUIRES: rank < ranks.
  void join(uint32_t rank);

  // The fewest compute-release reports before the all-rank epoch can advance (and with it the
  // oldest queued chunk pass): the member ranks still at it each owe one. 0 when no release can
  // advance it: every closed epoch released by every member, or no members.
  uint32_t releases_before_advance() const {
    if (members_ == 0 || min_ + 1 >= current_) return 0;
    return counts_[min_ & counts_mask_];
  }

  bool member(uint32_t rank) const { return member_[rank] != 0; }
  Epoch released(uint32_t rank) const { return released_[rank]; }
  uint32_t members() const { return members_; }

 private:
  struct Entry {
    ChunkId chunk;
    Epoch stamp;
  };

  uint32_t& count_at(Epoch epoch) { return counts_[epoch & counts_mask_]; }
  void advance_min();
  [[noreturn]] static void throw_nothing_passed();
  [[noreturn]] void refuse_retire(ChunkId chunk) const;
  void grow_counts();

  ComputeBarrier barrier_;
  Epoch current_ = 1;
  Epoch min_ = 0;
  std::vector<Epoch> released_;
  std::vector<uint8_t> member_;
  uint32_t members_ = 0;
  std::vector<uint32_t> counts_;  // members per released epoch, ring over [min_, current_)
  uint64_t counts_mask_ = 0;
  std::vector<Entry> queue_;      // ring of retired chunks in stamp order; capacity: chunks
  std::vector<Epoch> stamps_;
  std::vector<uint8_t> queued_flag_;
  uint32_t head_ = 0;
  uint32_t queued_ = 0;
};

}  // namespace hugepin
