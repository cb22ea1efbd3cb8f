// The copy-completion quorum: a copy job is complete when every rank of the TP x PP layout has
// reported it done; until each rank has settled it, its chunks stay held.
//
// A rank settles a job by reporting it (copy-complete or copy-failed: either way its copy of the
// job is over) or by exiting (its process is gone, so it copies nothing). The job's outcome:
//   complete  every rank reported copy-complete (quorum = all TP x PP ranks, exactly);
//   failed    a rank reported copy-failed, or a rank stopped answering before reporting it.
// A failed job keeps its slot until every rank settled it, so that reports of ranks still
// copying are applied (they prove the copy is over) and duplicates are still recognized.
//
// Jobs live in a power-of-two table of slots indexed by job id, checked against the id stored
// in the slot (a settled job's id never matches again). Each slot keeps a settled-rank bitset
// and its chunk list; both keep their memory across reuse, so record() never allocates and
// open() allocates only for a chunk list longer than that slot ever held.
//
// Thread-safety: none. The scheduler is single-threaded (OffloadScheduler owns one).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/contract.h"
#include "protocol/offload_types.h"

namespace hugepin {

class CompletionQuorum {
 public:
  struct Job {
    JobId id = 0;               // 0: the slot is free
    uint32_t unsettled = 0;     // ranks that have neither reported nor exited
    uint32_t awaiting_exit = 0; // of those, ranks declared unresponsive (may still copy)
    JobKind kind = JobKind::kLoad;
    bool failed = false;
    std::vector<ChunkId> chunks;
  };

  struct Outcome {
    ReportVerdict verdict = ReportVerdict::kApplied;  // kApplied, kUnknownJob or kDuplicate
    bool failed_now = false;  // this call failed the job
    bool settled = false;     // every rank settled it: release its chunks, then close() it
  };

  // REQUIRES: 1 <= ranks <= kMaxRanks; capacity >= 1 (rounded up to a power of two).
  // Throws Error otherwise.
  CompletionQuorum(uint32_t ranks, uint32_t capacity);

  // Opens a job that every rank must settle and returns its id. Throws Error, changing nothing,
  // when every slot holds an unsettled job (full()).
  JobId open(JobKind kind, std::span<const ChunkId> chunks);
  bool full() const { return open_jobs_ == slots_.size(); }

  // Rank `rank` reports job `job` copied (ok) or failed. kUnknownJob when no open job has that
  // id, kDuplicate when the rank settled it already; a rejection changes nothing.
  // REQUIRES: rank < ranks().
  // Inline (defined below): the per-report path, and a returned Outcome must not be packed
  // into memory and read back.
  Outcome record(JobId job, uint32_t rank, bool ok);

  // The open jobs that `rank` has not settled, oldest first (allocates; for rank death only).
  std::vector<JobId> unsettled_by(uint32_t rank) const;
  // Every open job, oldest first (allocates; for rank death only).
  std::vector<JobId> open_ids() const;
  // Fails an open job; returns false when it had failed already. REQUIRES: job is open; throws
  // Error otherwise.
  bool fail(JobId job);
  // A rank that has not settled `job` stopped answering. Returns true when this is the job's
  // first such rank (its chunks become quarantined). REQUIRES: job is open; throws Error
  // otherwise.
  bool await_exit(JobId job);
  // A rank that had not settled `job` exited; `was_awaited`: it had been counted by
  // await_exit(). Sets *quarantine_over when the job no longer waits for any exit.
  // REQUIRES: job is open and the rank has not settled it; throws Error otherwise.
  Outcome settle_exited(JobId job, uint32_t rank, bool was_awaited, bool* quarantine_over);

  // The open job with this id, or null.
  const Job* find(JobId job) const;
  // Frees a settled job's slot. REQUIRES: the job is open and settled; throws Error otherwise.
  void close(JobId job);

  uint32_t ranks() const { return ranks_; }
  uint32_t capacity() const { return static_cast<uint32_t>(slots_.size()); }
  uint32_t open_jobs() const { return open_jobs_; }
  uint32_t failed_open_jobs() const { return failed_open_; }
  // Open jobs that can still complete: waiting for quorum.
  uint32_t waiting_jobs() const { return open_jobs_ - failed_open_; }
  // REQUIRES: job is open and rank < ranks().
  bool settled_by(JobId job, uint32_t rank) const;
  // The fewest ranks any open job still waits for (1 to ranks()): no job settles before that
  // many more reports arrive. 0 when no open job waits for any. O(ranks) at worst.
  uint32_t fewest_unsettled() const;

 private:
  Job& slot(JobId job) { return slots_[job & mask_]; }
  uint64_t* bits(JobId job) { return &bits_[(job & mask_) * words_]; }
  const uint64_t* bits(JobId job) const { return &bits_[(job & mask_) * words_]; }
  Job& open_slot(JobId job);
  // One more rank settled `job`; returns whether that was its last.
  bool settle_one(Job& job) {
    --jobs_by_unsettled_[job.unsettled];
    ++jobs_by_unsettled_[--job.unsettled];
    return job.unsettled == 0;
  }

  uint32_t ranks_;
  uint32_t words_;  // 64-bit words per settled-rank bitset
  uint64_t mask_;
  std::vector<Job> slots_;
  std::vector<uint64_t> bits_;  // slots_.size() * words_
  std::vector<uint32_t> jobs_by_unsettled_;  // open jobs by their unsettled count, 0 to ranks_
  JobId next_id_ = 1;
  uint32_t open_jobs_ = 0;
  uint32_t failed_open_ = 0;
};

inline CompletionQuorum::Outcome CompletionQuorum::record(JobId id, uint32_t rank, bool ok) {
  HUGEPIN_REQUIRE(rank < ranks_, "rank ", rank, " of ", ranks_);
  Outcome outcome;
  Job& job = slot(id);
  if (job.id != id || id == 0) {
    outcome.verdict = ReportVerdict::kUnknownJob;
    return outcome;
  }
  uint64_t& word = bits(id)[rank / 64];
  uint64_t bit = uint64_t{1} << (rank % 64);
  if (word & bit) {
    outcome.verdict = ReportVerdict::kDuplicate;
    return outcome;
  }
  word |= bit;
  if (!ok && !job.failed) {
    job.failed = true;
    ++failed_open_;
    outcome.failed_now = true;
  }
  outcome.settled = settle_one(job);
  return outcome;
}

}  // namespace hugepin
