#include "protocol/completion_quorum.h"

#include <algorithm>
#include <bit>

namespace hugepin {

namespace {

constexpr uint32_t kMaxJobCapacity = 1u << 20;

bool test_bit(const uint64_t* words, uint32_t bit) { return (words[bit / 64] >> (bit % 64)) & 1; }
void set_bit(uint64_t* words, uint32_t bit) { words[bit / 64] |= uint64_t{1} << (bit % 64); }

}  // namespace

CompletionQuorum::CompletionQuorum(uint32_t ranks, uint32_t capacity) : ranks_(ranks) {
  if (ranks == 0 || ranks > kMaxRanks) {
    throw Error(cat("completion quorum: ", ranks, " ranks; TP x PP must be 1 to ", kMaxRanks));
  }
  if (capacity == 0 || capacity > kMaxJobCapacity) {
    throw Error(cat("completion quorum: room for ", capacity, " jobs in flight; must be 1 to ", kMaxJobCapacity));
  }
  uint32_t slots = std::bit_ceil(capacity);
  words_ = (ranks + 63) / 64;
  mask_ = slots - 1;
  slots_.resize(slots);
  bits_.assign(size_t{slots} * words_, 0);
  jobs_by_unsettled_.assign(size_t{ranks} + 1, 0);
}

JobId CompletionQuorum::open(JobKind kind, std::span<const ChunkId> chunks) {
  if (full()) {
    throw Error(cat("cannot dispatch: all ", slots_.size(), " job slots hold unsettled jobs ",
                    "(raise max_jobs_in_flight, or find the rank that stops reporting)"));
  }
  // Ids increase; skip those whose slot still holds an older job (a rank is slow on it).
  JobId id = next_id_;
  while (slot(id).id != 0) ++id;
  next_id_ = id + 1;
  Job& job = slot(id);
  job.chunks.assign(chunks.begin(), chunks.end());  // first: it may throw, and the slot stays free
  job.id = id;
  job.unsettled = ranks_;
  job.awaiting_exit = 0;
  job.kind = kind;
  job.failed = false;
  std::fill_n(bits(id), words_, 0);
  ++open_jobs_;
  ++jobs_by_unsettled_[ranks_];
  return id;
}

std::vector<JobId> CompletionQuorum::open_ids() const {
  std::vector<JobId> jobs;
  for (const Job& job : slots_) {
    if (job.id != 0) jobs.push_back(job.id);
  }
  std::sort(jobs.begin(), jobs.end());
  return jobs;
}

std::vector<JobId> CompletionQuorum::unsettled_by(uint32_t rank) const {
  std::vector<JobId> jobs;
  for (const Job& job : slots_) {
    if (job.id != 0 && !test_bit(bits(job.id), rank)) jobs.push_back(job.id);
  }
  std::sort(jobs.begin(), jobs.end());
  return jobs;
}

CompletionQuorum::Job& CompletionQuorum::open_slot(JobId id) {
  Job& job = slot(id);
  if (job.id != id || id == 0) throw Error(cat("completion quorum: job ", id, " is not open"));
  return job;
}

bool CompletionQuorum::fail(JobId id) {
  Job& job = open_slot(id);
  if (job.failed) return false;
  job.failed = true;
  ++failed_open_;
  return true;
}

bool CompletionQuorum::await_exit(JobId id) {
  Job& job = open_slot(id);
  return job.awaiting_exit++ == 0;
}

CompletionQuorum::Outcome CompletionQuorum::settle_exited(JobId id, uint32_t rank, bool was_awaited,
                                                          bool* quarantine_over) {
  Job& job = open_slot(id);
  uint64_t* settled = bits(id);
  if (test_bit(settled, rank)) throw Error(cat("completion quorum: rank ", rank, " settled job ", id, " already"));
  set_bit(settled, rank);
  *quarantine_over = was_awaited && --job.awaiting_exit == 0;
  Outcome outcome;
  outcome.settled = settle_one(job);
  return outcome;
}

const CompletionQuorum::Job* CompletionQuorum::find(JobId id) const {
  const Job& job = slots_[id & mask_];
  return job.id == id && id != 0 ? &job : nullptr;
}

void CompletionQuorum::close(JobId id) {
  Job& job = open_slot(id);
  if (job.unsettled != 0) throw Error(cat("completion quorum: job ", id, " closed with ", job.unsettled, " ranks unsettled"));
  if (job.failed) --failed_open_;
  job.id = 0;
  --open_jobs_;
  --jobs_by_unsettled_[0];
}

uint32_t CompletionQuorum::fewest_unsettled() const {
  if (open_jobs_ == 0) return 0;
  for (uint32_t k = 1; k <= ranks_; ++k) {
    if (jobs_by_unsettled_[k] != 0) return k;
  }
  return 0;  // every open job is settled, waiting for close()
}

bool CompletionQuorum::settled_by(JobId id, uint32_t rank) const {
  HUGEPIN_REQUIRE(find(id) != nullptr, "job ", id);
  HUGEPIN_REQUIRE(rank < ranks_, "rank ", rank, " of ", ranks_);
  return test_bit(bits(id), rank);
}

}  // namespace hugepin
