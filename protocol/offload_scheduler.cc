#include "protocol/offload_scheduler.h"

#include <numeric>

namespace hugepin {

namespace {

uint32_t checked_ranks(const SchedulerConfig& config) {
  if (config.tp == 0 || config.pp == 0) {
    throw Error(cat("scheduler: tp ", config.tp, ", pp ", config.pp, "; both must be at least 1"));
  }
  uint64_t ranks = uint64_t{config.tp} * config.pp;
  if (ranks > kMaxRanks) {
    throw Error(cat("scheduler: tp ", config.tp, " x pp ", config.pp, " = ", ranks, " ranks; at most ", kMaxRanks));
  }
  return static_cast<uint32_t>(ranks);
}

}  // namespace

OffloadScheduler::OffloadScheduler(const SchedulerConfig& config)
    : tp_(config.tp),
      ranks_(checked_ranks(config)),
      pins_(config.chunks),
      quorum_(ranks_, config.max_jobs_in_flight),
      fence_(ranks_, config.chunks, config.compute_barrier),
      rank_records_(ranks_),
      live_ranks_(ranks_) {
  completed_.reserve(quorum_.capacity());
}

void OffloadScheduler::check_rank(uint32_t rank, const char* call) const {
  if (rank >= ranks_) throw Error(cat(call, ": rank ", rank, " is out of range: TP x PP is ", ranks_));
}

JobId OffloadScheduler::dispatch(JobKind kind, std::span<const ChunkId> chunks) {
  if (chunks.empty()) throw Error(cat("cannot dispatch a ", job_kind_name(kind), " job of no chunks"));
  if (live_ranks_ != ranks_) {
    for (uint32_t rank = 0; rank < ranks_; ++rank) {
      RankLiveness state = rank_records_[rank].state;
      if (state != RankLiveness::kLive) {
        throw Error(cat("cannot dispatch: ", describe_rank(rank, tp_), " is ", rank_liveness_name(state),
                        ", so no job can reach its quorum of ", ranks_, " ranks"));
      }
    }
  }
  pins_.pin(chunks);
  JobId job = 0;
  try {
    job = quorum_.open(kind, chunks);
  } catch (...) {
    pins_.unpin(chunks);
    throw;
  }
  ++jobs_dispatched_;
  return job;
}

inline void OffloadScheduler::drain_fence() {
  while (fence_.front_passed()) pins_.fence_passed(fence_.pop_passed());
}

inline ReportVerdict OffloadScheduler::check_and_apply(const Report& report) {
  if (report.rank >= ranks_) return ReportVerdict::kUnknownRank;
  switch (report.kind) {
    case ReportKind::kCopyComplete:
    case ReportKind::kCopyFailed:
    case ReportKind::kComputeRelease:
    case ReportKind::kDetach:
    case ReportKind::kHeartbeat:
      break;
    case ReportKind::kAttach:
      return apply_attach(report);
    default:
      return ReportVerdict::kUnknownKind;
  }
  RankRecord& rank = rank_records_[report.rank];
  if (rank.state != RankLiveness::kLive) return ReportVerdict::kRankNotLive;
  if (report.sequence <= rank.last_sequence) return ReportVerdict::kSequenceReplay;
  ReportVerdict verdict = ReportVerdict::kApplied;
  switch (report.kind) {
    case ReportKind::kCopyComplete:
      verdict = apply_copy(report, true);
      break;
    case ReportKind::kCopyFailed:
      verdict = apply_copy(report, false);
      break;
    case ReportKind::kComputeRelease:
      verdict = fence_.release(report.rank, report.value);
      if (verdict == ReportVerdict::kApplied) drain_fence();
      break;
    case ReportKind::kDetach:
      // The worker leaves: whatever it has not reported may still be in flight until it exits.
      rank.last_sequence = report.sequence;
      rank_unresponsive(report.rank);
      break;
    default:  // kHeartbeat: liveness is the caller's business; the sequence still counts
      break;
  }
  if (verdict == ReportVerdict::kApplied) rank.last_sequence = report.sequence;
  return verdict;
}

inline ReportVerdict OffloadScheduler::apply_copy(const Report& report, bool ok) {
  CompletionQuorum::Outcome outcome = quorum_.record(report.value, report.rank, ok);
  if (outcome.verdict != ReportVerdict::kApplied) return outcome.verdict;
  if (outcome.failed_now) record_failure(report.value, FailureCause::kCopyFailed, report.rank, report.flags);
  if (outcome.settled) settle(report.value);
  return ReportVerdict::kApplied;
}

ReportVerdict OffloadScheduler::apply_attach(const Report& report) {
  RankRecord& rank = rank_records_[report.rank];
  switch (rank.state) {
    case RankLiveness::kExited:  // a replacement: it ran no GPU work of the closed epochs
      // The exited process's own attach, read late from its ring, is not a replacement.
      if (report.value != 0 && report.value == rank.exited_pid) return ReportVerdict::kSequenceReplay;
      join_replacement(report.rank, report.value, report.sequence);
      return ReportVerdict::kApplied;
    case RankLiveness::kUnresponsive:
      // Its process may still copy: a replacement must attach again once rank_exited() ran.
      return ReportVerdict::kRankNotExited;
    case RankLiveness::kLive:
      break;
  }
  if (report.sequence <= rank.last_sequence) return ReportVerdict::kSequenceReplay;
  // The first attach names the rank's process. Another process attaching means this one was
  // replaced before its death was seen: nothing it did may be trusted from here, and nothing
  // it may still be copying into may be released before it is gone.
  if (rank.pid != 0 && rank.pid != report.value) {
    rank_unresponsive(report.rank);
    return ReportVerdict::kRankNotExited;
  }
  rank.pid = report.value;
  rank.last_sequence = report.sequence;
  return ReportVerdict::kApplied;
}

void OffloadScheduler::join_replacement(uint32_t rank, uint64_t pid, uint64_t sequence) {
  RankRecord& record = rank_records_[rank];
  record.state = RankLiveness::kLive;
  record.pid = pid;
  record.last_sequence = sequence;  // its attach report's: the ring numbers its later reports above it
  ++live_ranks_;
  fence_.join(rank);
}

inline void OffloadScheduler::settle(JobId job) {
  const CompletionQuorum::Job* record = quorum_.find(job);
  pins_.unpin(record->chunks);
  if (!record->failed) {
    completed_.push_back(job);
    ++jobs_completed_;
  }
  quorum_.close(job);
}

ReportVerdict OffloadScheduler::apply(const Report& report) {
  ReportVerdict verdict = check_and_apply(report);
  if (verdict == ReportVerdict::kApplied) {
    ++reports_applied_;
  } else {
    ++reports_rejected_[static_cast<size_t>(verdict)];
  }
  return verdict;
}

void OffloadScheduler::record_failure(JobId job, FailureCause cause, uint32_t rank, uint32_t error) {
  const CompletionQuorum::Job* record = quorum_.find(job);
  FailedJob failed;
  failed.job = job;
  failed.kind = record->kind;
  failed.cause = cause;
  failed.rank = rank;
  failed.error = error;
  std::string what = cat("job ", job, " (", job_kind_name(record->kind), " of ", record->chunks.size(),
                         " chunks) failed: ", describe_rank(rank, tp_));
  if (cause == FailureCause::kCopyFailed) {
    failed.message = cat(what, " reported a copy failure",
                         error != 0 ? cat(": ", errno_text(static_cast<int>(error))) : std::string());
  } else {
    failed.message = cat(what, " stopped answering; its chunks stay quarantined until that process exits");
  }
  failed_.push_back(std::move(failed));
  ++jobs_failed_;
}

void OffloadScheduler::take_completed(std::vector<JobId>* out) {
  out->insert(out->end(), completed_.begin(), completed_.end());
  completed_.clear();
}

void OffloadScheduler::take_failed(std::vector<FailedJob>* out) {
  for (FailedJob& failed : failed_) out->push_back(std::move(failed));
  failed_.clear();
}

void OffloadScheduler::retire(ChunkId chunk) {
  pins_.retire(chunk);
  fence_.retire(chunk);
  drain_fence();  // a waived barrier passes at once
}

Epoch OffloadScheduler::begin_epoch() {
  Epoch epoch = fence_.begin_epoch();
  drain_fence();  // with no member ranks, the all-rank epoch follows the current one
  return epoch;
}

void OffloadScheduler::take_reusable(std::vector<ChunkId>* out) { pins_.take_reusable(out); }

size_t OffloadScheduler::rank_unresponsive(uint32_t rank) {
  check_rank(rank, "rank_unresponsive");
  RankRecord& record = rank_records_[rank];
  if (record.state != RankLiveness::kLive) return 0;
  record.state = RankLiveness::kUnresponsive;
  --live_ranks_;
  size_t failed = 0;
  for (JobId job : quorum_.unsettled_by(rank)) {
    if (quorum_.fail(job)) {
      record_failure(job, FailureCause::kRankUnresponsive, rank, 0);
      ++failed;
    }
    if (quorum_.await_exit(job)) pins_.quarantine(quorum_.find(job)->chunks);
  }
  return failed;
}

void OffloadScheduler::rank_exited(uint32_t rank) {
  check_rank(rank, "rank_exited");
  RankRecord& record = rank_records_[rank];
  if (record.state == RankLiveness::kExited) return;
  if (record.state == RankLiveness::kLive) rank_unresponsive(rank);
  record.state = RankLiveness::kExited;
  record.exited_pid = record.pid;
  record.pid = 0;
  // Every job this rank has not settled was counted by rank_unresponsive(): jobs are never
  // dispatched while a rank is not live.
  for (JobId job : quorum_.unsettled_by(rank)) {
    bool quarantine_over = false;
    CompletionQuorum::Outcome outcome = quorum_.settle_exited(job, rank, true, &quarantine_over);
    if (quarantine_over) pins_.unquarantine(quorum_.find(job)->chunks);
    if (outcome.settled) settle(job);
  }
  fence_.leave(rank);
  drain_fence();
}

bool OffloadScheduler::quiescent() const {
  return pins_.holds_clear() && fence_.waiting() == 0 && pins_.fenced_chunks() == 0;
}

SchedulerFigures OffloadScheduler::figures() const {
  SchedulerFigures figures;
  figures.ranks = ranks_;
  for (const RankRecord& record : rank_records_) {
    if (record.state == RankLiveness::kLive) ++figures.live_ranks;
    if (record.state == RankLiveness::kUnresponsive) ++figures.unresponsive_ranks;
    if (record.state == RankLiveness::kExited) ++figures.exited_ranks;
  }
  // Dead as the inspector counts them: declared unresponsive (process maybe still there) or
  // exited and not yet replaced.
  figures.dead_ranks = figures.unresponsive_ranks + figures.exited_ranks;
  figures.chunks = pins_.chunks();
  figures.pinned_chunks = pins_.pinned_chunks();
  figures.holds = pins_.total_holds();
  figures.quarantined_chunks = pins_.quarantined_chunks();
  figures.retired_chunks_waiting_fence = fence_.waiting();
  figures.retired_waiting_holds = pins_.fenced_chunks();
  figures.reusable_chunks = pins_.reusable_chunks();
  figures.jobs_waiting_quorum = quorum_.waiting_jobs();
  figures.jobs_failed_holding = quorum_.failed_open_jobs();
  figures.current_epoch = fence_.current_epoch();
  figures.all_rank_epoch = fence_.all_rank_epoch();
  figures.jobs_dispatched = jobs_dispatched_;
  figures.jobs_completed = jobs_completed_;
  figures.jobs_failed = jobs_failed_;
  figures.reports_applied = reports_applied_;
  figures.rejected_by_verdict = reports_rejected_;
  figures.reports_rejected = std::accumulate(reports_rejected_.begin(), reports_rejected_.end(), uint64_t{0});
  return figures;
}

}  // namespace hugepin
