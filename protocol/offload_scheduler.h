// The scheduler side of KV offloading: what an engine's scheduler calls so that no host chunk is
// reused while a copy or a kernel of any TP x PP rank may still touch it. The rules (copy pins,
// the completion quorum, the retirement fence, which reports apply, rank death and replacement)
// are in docs/protocol.md, with the spin model and the simulation that check them. One loop
// drives it:
//
//   JobId job = scheduler.dispatch(JobKind::kStore, chunks);  // pins, then send job to ranks
//   for (const Report& r : popped_from_rings) scheduler.apply(r);
//   scheduler.take_completed(&done);  scheduler.take_failed(&failed);
//   scheduler.retire(chunk);          // the engine evicted it
//   scheduler.begin_epoch();          // a step's GPU work was queued
//   scheduler.take_reusable(&free);   // chunks nothing can touch any more
//
// In short: a job's chunks are held until every rank has settled it (reported it, or exited); a
// retired chunk comes back once no copy holds it and every member rank has released the epoch
// it was retired in (unless SchedulerConfig::compute_barrier is kWaived); a rank that stops
// answering fails its unreported jobs and keeps their chunks quarantined until its process is
// gone. Nothing is released earlier.
//
// apply() for copy-complete, copy-failed and compute-release is O(1) (amortized for the fence,
// plus the unpin of a job's chunks when its last rank settles) and does not allocate; failures
// allocate their message.
//
// Thread-safety: none; the scheduler is single-threaded. Call everything from one thread.
#pragma once

#include <algorithm>
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

  // Applies one report from a rank's ring. Checks, in order: rank in range, kind known, rank
  // live, sequence above the rank's last applied one, then the kind's own (job open and not
  // settled by this rank; epoch advancing and closed). A rejected report is counted by reason
  // and changes nothing else (docs/protocol.md, "Jobs, copy pins, the fence and reports").
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

  // docs/protocol.md, "Rank death": rank_unresponsive(r) fails r's unreported jobs and
  // quarantines their chunks; rank_exited(r) settles them once r's process is gone. Both throw Error for rank >= TP x PP. rank_unresponsive returns the
  // number of jobs it failed (0 when the rank was not live); rank_exited is a no-op for an
  // exited rank.
  size_t rank_unresponsive(uint32_t rank);
  void rank_exited(uint32_t rank);

  // No chunk is held by a copy: the copy side allows unmapping a region.
  bool holds_clear() const { return pins_.holds_clear(); }
  // Holds clear and no retired chunk waits on the fence: no copy and no GPU work of a closed
  // epoch can touch any chunk. What unmapping a region should wait for.
  bool quiescent() const;

  // The fewest reports (of any ranks) after which a job could settle or the all-rank epoch
  // advance (a retired chunk pass the fence): what a scheduler that sleeps waits for
  // (ipc/report_gate.h). 0 when nothing waits on a report.
  uint32_t reports_before_progress() const {
    const uint32_t jobs = quorum_.fewest_unsettled();
    const uint32_t fence = fence_.releases_before_advance();
    if (jobs == 0 || fence == 0) return std::max(jobs, fence);
    return std::min(jobs, fence);
  }

  // The fewest compute-releases after which the all-rank epoch could advance (a retired chunk
  // pass the fence); 0 when the fence waits on none.
  uint32_t releases_before_fence_progress() const { return fence_.releases_before_advance(); }

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
