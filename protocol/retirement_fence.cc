#include "protocol/retirement_fence.h"

namespace hugepin {

namespace {
constexpr size_t kInitialWindow = 16;  // epochs the slowest rank may lag before the ring grows
}  // namespace

RetirementFence::RetirementFence(uint32_t ranks, uint32_t chunks, ComputeBarrier barrier) : barrier_(barrier) {
  if (ranks == 0 || ranks > kMaxRanks) {
    throw Error(cat("retirement fence: ", ranks, " ranks; TP x PP must be 1 to ", kMaxRanks));
  }
  if (chunks == 0) throw Error("retirement fence: chunk count 0; the plan must give at least one chunk");
  released_.assign(ranks, 0);
  member_.assign(ranks, 1);
  members_ = ranks;
  counts_.assign(kInitialWindow, 0);
  counts_mask_ = kInitialWindow - 1;
  count_at(0) = ranks;
  queue_.resize(chunks);
  stamps_.assign(chunks, 0);
  queued_flag_.assign(chunks, 0);
}

void RetirementFence::grow_counts() {
  std::vector<uint32_t> grown(counts_.size() * 2, 0);
  uint64_t grown_mask = grown.size() - 1;
  for (Epoch epoch = min_; epoch < current_; ++epoch) grown[epoch & grown_mask] = count_at(epoch);
  counts_.swap(grown);
  counts_mask_ = grown_mask;
}

Epoch RetirementFence::begin_epoch() {
  // After this call the ring must cover [min_, current_ + 1).
  if (current_ + 1 - min_ > counts_.size()) grow_counts();
  ++current_;
  if (members_ == 0) min_ = current_ - 1;
  return current_;
}

void RetirementFence::refuse_retire(ChunkId chunk) const {
  if (chunk >= stamps_.size()) {
    throw Error(cat("chunk ", chunk, " is out of range: the plan has ", stamps_.size(), " chunks"));
  }
  throw Error(cat("chunk ", chunk, " is waiting on the retirement fence already"));
}

void RetirementFence::throw_nothing_passed() {
  throw Error("retirement fence: pop with no chunk past the fence");
}

void RetirementFence::advance_min() {
  if (members_ == 0) {
    min_ = current_ - 1;
    return;
  }
  // Some member has released an epoch in [min_, current_): the scan stops there.
  while (count_at(min_) == 0) ++min_;
}

ReportVerdict RetirementFence::release(uint32_t rank, Epoch epoch) {
  HUGEPIN_REQUIRE(rank < released_.size() && member_[rank], "rank ", rank, " of ", released_.size());
  Epoch previous = released_[rank];
  if (epoch <= previous) return ReportVerdict::kEpochNotAdvancing;
  if (epoch >= current_) return ReportVerdict::kEpochNotClosed;
  --count_at(previous);
  ++count_at(epoch);
  released_[rank] = epoch;
  if (previous == min_ && count_at(min_) == 0) advance_min();
  return ReportVerdict::kApplied;
}

void RetirementFence::leave(uint32_t rank) {
  HUGEPIN_REQUIRE(rank < released_.size(), "rank ", rank, " of ", released_.size());
  if (!member_[rank]) return;
  member_[rank] = 0;
  --members_;
  --count_at(released_[rank]);
  if (members_ == 0 || (released_[rank] == min_ && count_at(min_) == 0)) advance_min();
}

void RetirementFence::join(uint32_t rank) {
  HUGEPIN_REQUIRE(rank < released_.size(), "rank ", rank, " of ", released_.size());
  if (member_[rank]) return;
  member_[rank] = 1;
  ++members_;
  released_[rank] = current_ - 1;
  ++count_at(current_ - 1);
}

}  // namespace hugepin
