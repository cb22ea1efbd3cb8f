// The scheduler side of KV offloading: what an engine's scheduler calls so that no host chunk is
// reused while a copy or a kernel of any TP x PP rank may still touch it.
//
// One loop drives it (see README, "Copy pins, quorum and the retirement fence"):
//
//   JobId job = scheduler.dispatch(JobKind::kStore, chunks);  // pins, then send job to ranks
//   for (const Report& r : popped_from_rings) scheduler.apply(r);
//   scheduler.take_completed(&done);  scheduler.take_failed(&failed);
//   scheduler.retire(chunk);          // the engine evicted it
//   scheduler.begin_epoch();          // a step's GPU work was queued
//   scheduler.take_reusable(&free);   // chunks nothing can touch any more
//
// Copy pins: dispatch() adds a hold to every chunk of the job before the job is sent; the holds
// go when every rank has settled the job (completion_quorum.h). A job completes when all
// TP x PP ranks reported copy-complete, exactly once each.
//
// Retirement fence: retire() stamps a chunk with the current epoch; it becomes reusable when it
// has no holds and every member rank reported compute-release at or past the stamp
// (retirement_fence.h). SchedulerConfig::compute_barrier = kWaived (synchronous execution)
// lets holds alone decide.
//
// Rank death. A rank that stops answering may still have DMA in flight into its host chunks and
// GPU work reading them; only the exit of its process ends that. So:
//   rank_unresponsive(r)  (the caller's heartbeat timeout, or a kDetach report): r's later
//       reports are rejected; every job r has not reported fails now (FailedJob names the flat
//       rank and its tp_rank, pp_rank) and its chunks are quarantined: held, and not pinnable.
//       r stays a fence member at its last release: chunks retired at or after that epoch wait.
//       dispatch() is refused until every rank is live again.
//   rank_exited(r)  (its process is confirmed gone: ProcessWatch, pidfd): r settles every job it
//       had not reported; a job's quarantine ends when all of its unresponsive ranks have
//       exited, and its holds go once the live ranks have reported it too. r leaves the fence,
//       so it no longer holds back the all-rank epoch. Implies rank_unresponsive(r) first.
//   kAttach from an exited rank: a replacement. It is live again and joins the fence at
//       current_epoch() - 1; the engine must give it no GPU work of closed epochs, and none of
//       the jobs sent to the process it replaces (its exit settled them; the model in
//       protocol/model shows a replayed job would be copied with no hold on its chunks). An attach
//       that names the process that exited (read late from its ring) is rejected.
//   kAttach from another process while the rank is live: the rank's process was replaced
//       before its death was seen (a replacement may claim a rank whose owner is dead). Nothing
//       more is trusted from the rank: it becomes unresponsive (its jobs fail, their chunks stay
//       quarantined until rank_exited(r): the old process may still copy), and the attach is
//       refused like one to an unresponsive rank: the replacement attaches again after the exit.
// Nothing is released earlier: a report from a rank once declared unresponsive is never trusted.
//
// Reports: apply() checks, in order: rank in range, kind known, rank live, sequence above the
// rank's last applied one, then the kind's own checks (job open and not settled by this rank;
// epoch advancing and closed). A rejected report is counted by reason and changes nothing else.
// A report for a failed job from a live rank is applied: it proves that rank's copy is over.
//
// apply() for copy-complete, copy-failed and compute-release is O(1) (amortized for the fence,
// plus the unpin of a job's chunks when its last rank settles) and does not allocate; failures
// allocate their message.
//
// Thread-safety: none; the scheduler is single-threaded. Call everything from one thread.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "protocol/completion_quorum.h"
#include "protocol/copy_pins.h"
#include "protocol/offload_types.h"
#include "protocol/report.h"
#include "protocol/retirement_fence.h"
#include "protocol/scheduler_figures.h"

namespace hugepin {

struct SchedulerConfig {
  uint32_t tp = 1;
  uint32_t pp = 1;
  uint32_t chunks = 0;                 // the plan's common chunk count
  uint32_t max_jobs_in_flight = 4096;  // rounded up to a power of two
  ComputeBarrier compute_barrier = ComputeBarrier::kRequired;
};

enum class FailureCause : uint8_t {
  kCopyFailed = 0,        // the rank reported copy-failed (error: its errno)
  kRankUnresponsive = 1,  // the rank stopped answering before reporting the job
};

struct FailedJob {
  JobId job = 0;
  JobKind kind = JobKind::kLoad;
  FailureCause cause = FailureCause::kCopyFailed;
  uint32_t rank = 0;  // the flat rank that failed it
  uint32_t error = 0; // kCopyFailed: the errno the rank sent (0 when none)
  std::string message;  // one line, naming the job, the rank and its (tp_rank, pp_rank)
};

class OffloadScheduler {
 public:
  // Every rank starts live, every chunk active and unpinned, epoch 1. Throws Error naming the
  // field when tp or pp is 0, tp x pp > kMaxRanks, chunks is 0, or max_jobs_in_flight is 0 or
  // above 2^20.
  explicit OffloadScheduler(const SchedulerConfig& config);

  // Pins every listed chunk (a chunk listed twice is held twice) and opens a job that all
  // TP x PP ranks must report. Send the job to the ranks only after this returns. Throws Error,
  // changing nothing, when `chunks` is empty, a rank is not live, a chunk is out of range, not
  // active, or quarantined, or max_jobs_in_flight jobs are unsettled.
  JobId dispatch(JobKind kind, std::span<const ChunkId> chunks);

  // Applies one report from a rank's ring; see the top of this file for the checks.
  ReportVerdict apply(const Report& report);

  // Appends the jobs that completed since the last call (oldest first) and forgets them.
  void take_completed(std::vector<JobId>* out);
  // Appends the jobs that failed since the last call and forgets them. A failed job's chunks
  // may still be held (and quarantined); they return through retire() as any chunk does.
  void take_failed(std::vector<FailedJob>* out);

  // The engine gives up `chunk`. Throws Error when it is out of range or not active (retired
  // already, or reusable and not yet taken back).
  void retire(ChunkId chunk);
  // Closes the current epoch; returns the new one. Chunks retired from now are stamped with it.
  Epoch begin_epoch();
  Epoch current_epoch() const { return fence_.current_epoch(); }
  Epoch all_rank_epoch() const { return fence_.all_rank_epoch(); }
  // Appends every chunk that became reusable (no holds, fence passed) since the last call and
  // hands each back to the engine as active. Each retirement yields the chunk once.
  void take_reusable(std::vector<ChunkId>* out);

  // See "Rank death" above. Both throw Error for rank >= TP x PP. rank_unresponsive returns the
  // number of jobs it failed (0 when the rank was not live); rank_exited is a no-op for an
  // exited rank.
  size_t rank_unresponsive(uint32_t rank);
  void rank_exited(uint32_t rank);

  // No chunk is held by a copy: the copy side allows unmapping a region.
  bool holds_clear() const { return pins_.holds_clear(); }
  // Holds clear and no retired chunk waits on the fence: no copy and no GPU work of a closed
  // epoch can touch any chunk. What unmapping a region should wait for.
  bool quiescent() const;

  SchedulerFigures figures() const;
  uint32_t ranks() const { return ranks_; }
  uint32_t tp() const { return tp_; }
  RankLiveness rank_state(uint32_t rank) const { return rank_records_.at(rank).state; }
  // The pid of the rank's attached process (from kAttach), 0 when none is known.
  uint64_t rank_pid(uint32_t rank) const { return rank_records_.at(rank).pid; }
  const CopyPins& pins() const { return pins_; }
  const CompletionQuorum& quorum() const { return quorum_; }
  const RetirementFence& fence() const { return fence_; }

 private:
  struct RankRecord {
    uint64_t last_sequence = 0;
    uint64_t pid = 0;
    RankLiveness state = RankLiveness::kLive;
    uint64_t exited_pid = 0;  // the process rank_exited() confirmed gone
  };

  ReportVerdict check_and_apply(const Report& report);
  ReportVerdict apply_copy(const Report& report, bool ok);
  ReportVerdict apply_attach(const Report& report);
  void join_replacement(uint32_t rank, uint64_t pid, uint64_t sequence);
  void settle(JobId job);
  void record_failure(JobId job, FailureCause cause, uint32_t rank, uint32_t error);
  void drain_fence();
  void check_rank(uint32_t rank, const char* call) const;

  uint32_t tp_;
  uint32_t ranks_;
  CopyPins pins_;
  CompletionQuorum quorum_;
  RetirementFence fence_;
  std::vector<RankRecord> rank_records_;
  uint32_t live_ranks_;
  std::vector<JobId> completed_;  // reserved for a job table's worth between take_completed()s
  std::vector<FailedJob> failed_;
  uint64_t jobs_dispatched_ = 0;
  uint64_t jobs_completed_ = 0;
  uint64_t jobs_failed_ = 0;
  uint64_t reports_applied_ = 0;
  std::array<uint64_t, kReportVerdicts> reports_rejected_{};
};

}  // namespace hugepin
