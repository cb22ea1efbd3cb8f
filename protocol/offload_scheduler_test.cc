#include "protocol/offload_scheduler.h"

#include <doctest/doctest.h>
#include <errno.h>

#include <vector>

namespace hugepin {
namespace {

// Posts reports as rank rings would: each rank numbers its own from 1.
class Ranks {
 public:
  explicit Ranks(uint32_t ranks) : sequence_(ranks, 0) {}
  Report make(ReportKind kind, uint32_t rank, uint64_t value, uint32_t flags = 0) {
    Report report{};
    report.kind = kind;
    report.rank = static_cast<uint16_t>(rank);
    report.flags = flags;
    report.sequence = ++sequence_.at(rank);
    report.value = value;
    return report;
  }
  void restart(uint32_t rank) { sequence_.at(rank) = 0; }  // a replacement process

 private:
  std::vector<uint64_t> sequence_;
};

SchedulerConfig config(uint32_t tp, uint32_t pp, uint32_t chunks) {
  SchedulerConfig config;
  config.tp = tp;
  config.pp = pp;
  config.chunks = chunks;
  return config;
}

std::vector<JobId> completed(OffloadScheduler& scheduler) {
  std::vector<JobId> out;
  scheduler.take_completed(&out);
  return out;
}

std::vector<FailedJob> failed(OffloadScheduler& scheduler) {
  std::vector<FailedJob> out;
  scheduler.take_failed(&out);
  return out;
}

std::vector<ChunkId> reusable(OffloadScheduler& scheduler) {
  std::vector<ChunkId> out;
  scheduler.take_reusable(&out);
  return out;
}

void report_all(OffloadScheduler& scheduler, Ranks& ranks, ReportKind kind, uint64_t value) {
  for (uint32_t rank = 0; rank < scheduler.ranks(); ++rank) {
    REQUIRE(scheduler.apply(ranks.make(kind, rank, value)) == ReportVerdict::kApplied);
  }
}

const std::vector<ChunkId> kJobChunks{1, 2};

}  // namespace

TEST_CASE("bad configurations name the field") {
  CHECK_THROWS_WITH_AS(OffloadScheduler(config(0, 1, 8)), "scheduler: tp 0, pp 1; both must be at least 1", Error);
  CHECK_THROWS_WITH_AS(OffloadScheduler(config(64, 32, 8)), "scheduler: tp 64 x pp 32 = 2048 ranks; at most 1024",
                       Error);
  CHECK_THROWS_AS(OffloadScheduler(config(2, 2, 0)), Error);
  SchedulerConfig no_jobs = config(2, 2, 8);
  no_jobs.max_jobs_in_flight = 0;
  CHECK_THROWS_AS(OffloadScheduler{no_jobs}, Error);
}

TEST_CASE("a job completes when all TP x PP ranks reported, and its chunks are unpinned then") {
  OffloadScheduler scheduler(config(2, 2, 8));
  Ranks ranks(4);
  JobId job = scheduler.dispatch(JobKind::kStore, kJobChunks);
  CHECK(scheduler.pins().holds(1) == 1);
  CHECK_FALSE(scheduler.holds_clear());
  for (uint32_t rank = 0; rank < 3; ++rank) {
    CHECK(scheduler.apply(ranks.make(ReportKind::kCopyComplete, rank, job)) == ReportVerdict::kApplied);
    CHECK(completed(scheduler).empty());
  }
  CHECK(scheduler.figures().jobs_waiting_quorum == 1);
  CHECK(scheduler.apply(ranks.make(ReportKind::kCopyComplete, 3, job)) == ReportVerdict::kApplied);
  CHECK(completed(scheduler) == std::vector<JobId>{job});
  CHECK(completed(scheduler).empty());
  CHECK(scheduler.holds_clear());
  CHECK(scheduler.quiescent());
  SchedulerFigures figures = scheduler.figures();
  CHECK(figures.jobs_completed == 1);
  CHECK(figures.jobs_waiting_quorum == 0);
  CHECK(figures.reports_applied == 4);
}

TEST_CASE("every kind of bad report is rejected, counted by reason, and changes nothing else") {
  OffloadScheduler scheduler(config(2, 1, 8));
  Ranks ranks(2);
  JobId job = scheduler.dispatch(JobKind::kLoad, kJobChunks);
  REQUIRE(scheduler.apply(ranks.make(ReportKind::kCopyComplete, 0, job)) == ReportVerdict::kApplied);
  SchedulerFigures before = scheduler.figures();

  Report unknown_rank = ranks.make(ReportKind::kCopyComplete, 1, job);
  unknown_rank.rank = 2;
  CHECK(scheduler.apply(unknown_rank) == ReportVerdict::kUnknownRank);
  Report unknown_kind = ranks.make(ReportKind::kCopyComplete, 1, job);
  unknown_kind.kind = static_cast<ReportKind>(77);
  CHECK(scheduler.apply(unknown_kind) == ReportVerdict::kUnknownKind);
  Report replay = ranks.make(ReportKind::kCopyComplete, 0, job);
  replay.sequence = 1;  // rank 0's first report, again
  CHECK(scheduler.apply(replay) == ReportVerdict::kSequenceReplay);
  CHECK(scheduler.apply(ranks.make(ReportKind::kCopyComplete, 0, job)) == ReportVerdict::kDuplicate);
  CHECK(scheduler.apply(ranks.make(ReportKind::kCopyFailed, 0, job, EIO)) == ReportVerdict::kDuplicate);
  CHECK(scheduler.apply(ranks.make(ReportKind::kCopyComplete, 1, job + 1)) == ReportVerdict::kUnknownJob);
  CHECK(scheduler.apply(ranks.make(ReportKind::kCopyComplete, 1, 0)) == ReportVerdict::kUnknownJob);
  CHECK(scheduler.apply(ranks.make(ReportKind::kComputeRelease, 1, 1)) == ReportVerdict::kEpochNotClosed);
  CHECK(scheduler.apply(ranks.make(ReportKind::kComputeRelease, 1, 0)) == ReportVerdict::kEpochNotAdvancing);

  SchedulerFigures after = scheduler.figures();
  CHECK(after.reports_applied == before.reports_applied);
  CHECK(after.reports_rejected == 9);
  auto rejected = [&](ReportVerdict verdict) { return after.rejected_by_verdict[static_cast<size_t>(verdict)]; };
  CHECK(rejected(ReportVerdict::kUnknownRank) == 1);
  CHECK(rejected(ReportVerdict::kUnknownKind) == 1);
  CHECK(rejected(ReportVerdict::kSequenceReplay) == 1);
  CHECK(rejected(ReportVerdict::kDuplicate) == 2);
  CHECK(rejected(ReportVerdict::kUnknownJob) == 2);
  CHECK(rejected(ReportVerdict::kEpochNotClosed) == 1);
  CHECK(rejected(ReportVerdict::kEpochNotAdvancing) == 1);
  CHECK(after.holds == before.holds);
  CHECK(after.jobs_waiting_quorum == 1);
  CHECK(after.jobs_failed == 0);
  CHECK(failed(scheduler).empty());
  CHECK(completed(scheduler).empty());
  // Still completes normally: nothing was applied twice.
  CHECK(scheduler.apply(ranks.make(ReportKind::kCopyComplete, 1, job)) == ReportVerdict::kApplied);
  CHECK(completed(scheduler) == std::vector<JobId>{job});
  CHECK(scheduler.apply(ranks.make(ReportKind::kCopyComplete, 1, job)) == ReportVerdict::kUnknownJob);
}

TEST_CASE("a copy failure fails the job at once, naming the rank; the chunks wait for the other ranks") {
  OffloadScheduler scheduler(config(2, 2, 8));
  Ranks ranks(4);
  JobId job = scheduler.dispatch(JobKind::kStore, kJobChunks);
  CHECK(scheduler.apply(ranks.make(ReportKind::kCopyFailed, 3, job, EIO)) == ReportVerdict::kApplied);
  std::vector<FailedJob> failures = failed(scheduler);
  REQUIRE(failures.size() == 1);
  CHECK(failures[0].job == job);
  CHECK(failures[0].cause == FailureCause::kCopyFailed);
  CHECK(failures[0].rank == 3);
  CHECK(failures[0].error == EIO);
  CHECK(failures[0].message ==
        "job 1 (store of 2 chunks) failed: rank 3 (tp_rank 1, pp_rank 1) reported a copy failure: "
        "Input/output error (EIO 5)");
  CHECK(scheduler.figures().jobs_failed_holding == 1);
  // The other ranks' copies may still be running: the chunks stay held until they report.
  for (uint32_t rank = 0; rank < 3; ++rank) {
    CHECK_FALSE(scheduler.holds_clear());
    CHECK(scheduler.apply(ranks.make(ReportKind::kCopyComplete, rank, job)) == ReportVerdict::kApplied);
  }
  CHECK(scheduler.holds_clear());
  CHECK(completed(scheduler).empty());
  CHECK(failed(scheduler).empty());  // reported once
  CHECK(scheduler.figures().jobs_failed_holding == 0);
}

TEST_CASE("a retired chunk is reusable only past its fence and after its last unpin") {
  OffloadScheduler scheduler(config(2, 1, 8));
  Ranks ranks(2);
  JobId job = scheduler.dispatch(JobKind::kLoad, kJobChunks);
  scheduler.retire(1);  // held, stamp 1
  scheduler.retire(5);  // not held, stamp 1
  CHECK_THROWS_AS(scheduler.retire(5), Error);
  std::vector<ChunkId> retired_chunk{5};
  CHECK_THROWS_AS(scheduler.dispatch(JobKind::kStore, retired_chunk), Error);
  CHECK(scheduler.figures().retired_chunks_waiting_fence == 2);
  CHECK(scheduler.begin_epoch() == 2);
  CHECK(scheduler.apply(ranks.make(ReportKind::kComputeRelease, 0, 1)) == ReportVerdict::kApplied);
  CHECK(reusable(scheduler).empty());  // rank 1 has not released epoch 1
  CHECK(scheduler.apply(ranks.make(ReportKind::kComputeRelease, 1, 1)) == ReportVerdict::kApplied);
  CHECK(scheduler.all_rank_epoch() == 1);
  CHECK(reusable(scheduler) == std::vector<ChunkId>{5});
  CHECK(scheduler.figures().retired_waiting_holds == 1);
  CHECK_FALSE(scheduler.quiescent());
  report_all(scheduler, ranks, ReportKind::kCopyComplete, job);
  CHECK(reusable(scheduler) == std::vector<ChunkId>{1});
  CHECK(reusable(scheduler).empty());
  CHECK(scheduler.quiescent());
  scheduler.retire(5);  // a reused chunk can be retired again
}

TEST_CASE("a waived compute barrier lets holds alone decide") {
  SchedulerConfig synchronous = config(4, 1, 8);
  synchronous.compute_barrier = ComputeBarrier::kWaived;
  OffloadScheduler scheduler(synchronous);
  Ranks ranks(4);
  JobId job = scheduler.dispatch(JobKind::kStore, kJobChunks);
  scheduler.retire(3);
  scheduler.retire(2);
  CHECK(reusable(scheduler) == std::vector<ChunkId>{3});
  report_all(scheduler, ranks, ReportKind::kCopyComplete, job);
  CHECK(reusable(scheduler) == std::vector<ChunkId>{2});
}

TEST_CASE("dispatch refuses bad chunk lists and a full job table, changing nothing") {
  SchedulerConfig small = config(1, 1, 4);
  small.max_jobs_in_flight = 2;
  OffloadScheduler scheduler(small);
  std::vector<ChunkId> none;
  CHECK_THROWS_WITH_AS(scheduler.dispatch(JobKind::kLoad, none), "cannot dispatch a load job of no chunks", Error);
  std::vector<ChunkId> out_of_range{0, 4};
  CHECK_THROWS_AS(scheduler.dispatch(JobKind::kLoad, out_of_range), Error);
  CHECK(scheduler.holds_clear());
  std::vector<ChunkId> one{0};
  scheduler.dispatch(JobKind::kLoad, one);
  scheduler.dispatch(JobKind::kLoad, one);
  CHECK_THROWS_AS(scheduler.dispatch(JobKind::kLoad, one), Error);
  CHECK(scheduler.pins().holds(0) == 2);
  CHECK(scheduler.figures().jobs_dispatched == 2);
}

TEST_CASE("an unresponsive rank fails its jobs, quarantines their chunks and holds the fence until it exits") {
  OffloadScheduler scheduler(config(2, 2, 8));
  Ranks ranks(4);
  JobId reported = scheduler.dispatch(JobKind::kStore, std::vector<ChunkId>{0});
  JobId waiting = scheduler.dispatch(JobKind::kStore, kJobChunks);
  CHECK(scheduler.apply(ranks.make(ReportKind::kCopyComplete, 2, reported)) == ReportVerdict::kApplied);
  scheduler.retire(6);  // stamp 1
  scheduler.begin_epoch();

  CHECK(scheduler.rank_unresponsive(2) == 1);  // `reported` does not wait for rank 2
  CHECK(scheduler.rank_unresponsive(2) == 0);  // idempotent
  CHECK(scheduler.rank_state(2) == RankLiveness::kUnresponsive);
  std::vector<FailedJob> failures = failed(scheduler);
  REQUIRE(failures.size() == 1);
  CHECK(failures[0].job == waiting);
  CHECK(failures[0].cause == FailureCause::kRankUnresponsive);
  CHECK(failures[0].message ==
        "job 2 (store of 2 chunks) failed: rank 2 (tp_rank 0, pp_rank 1) stopped answering; its chunks stay "
        "quarantined until that process exits");
  CHECK(scheduler.pins().quarantined(1));
  CHECK(scheduler.pins().quarantined(2));
  CHECK_FALSE(scheduler.pins().quarantined(0));
  SchedulerFigures figures = scheduler.figures();
  CHECK(figures.quarantined_chunks == 2);
  CHECK(figures.unresponsive_ranks == 1);
  CHECK(figures.live_ranks == 3);

  // Its reports are no longer trusted; no job can reach quorum, so dispatch is refused.
  CHECK(scheduler.apply(ranks.make(ReportKind::kCopyComplete, 2, waiting)) == ReportVerdict::kRankNotLive);
  CHECK(scheduler.apply(ranks.make(ReportKind::kComputeRelease, 2, 1)) == ReportVerdict::kRankNotLive);
  CHECK_THROWS_WITH_AS(scheduler.dispatch(JobKind::kLoad, std::vector<ChunkId>{7}),
                       "cannot dispatch: rank 2 (tp_rank 0, pp_rank 1) is unresponsive, so no job can reach its "
                       "quorum of 4 ranks",
                       Error);
  // A new process cannot take the rank while the old one may still exist.
  CHECK(scheduler.apply(ranks.make(ReportKind::kAttach, 2, 999)) == ReportVerdict::kRankNotExited);

  // The live ranks finish everything: still nothing is released, rank 2 may still copy and compute.
  for (uint32_t rank : {0u, 1u, 3u}) {
    CHECK(scheduler.apply(ranks.make(ReportKind::kCopyComplete, rank, reported)) == ReportVerdict::kApplied);
    CHECK(scheduler.apply(ranks.make(ReportKind::kCopyComplete, rank, waiting)) == ReportVerdict::kApplied);
    CHECK(scheduler.apply(ranks.make(ReportKind::kComputeRelease, rank, 1)) == ReportVerdict::kApplied);
  }
  CHECK(completed(scheduler) == std::vector<JobId>{reported});
  CHECK(scheduler.pins().quarantined(1));
  CHECK(scheduler.pins().holds(1) == 1);
  CHECK(scheduler.all_rank_epoch() == 0);
  CHECK(reusable(scheduler).empty());

  scheduler.rank_exited(2);
  CHECK(scheduler.rank_state(2) == RankLiveness::kExited);
  CHECK(scheduler.holds_clear());
  CHECK(scheduler.figures().quarantined_chunks == 0);
  CHECK(scheduler.all_rank_epoch() == 1);
  CHECK(reusable(scheduler) == std::vector<ChunkId>{6});
  CHECK(completed(scheduler).empty());  // the failed job never completes
  scheduler.rank_exited(2);             // no-op
  CHECK(scheduler.apply(ranks.make(ReportKind::kCopyComplete, 2, waiting)) == ReportVerdict::kRankNotLive);

  // A replacement attaches and joins at the current epoch (2): it ran nothing of epoch 1.
  ranks.restart(2);
  CHECK(scheduler.apply(ranks.make(ReportKind::kAttach, 2, 4242)) == ReportVerdict::kApplied);
  CHECK(scheduler.rank_state(2) == RankLiveness::kLive);
  CHECK(scheduler.rank_pid(2) == 4242);
  CHECK(scheduler.fence().released(2) == 1);
  scheduler.retire(5);  // stamp 2: the replacement must release it too
  scheduler.begin_epoch();
  for (uint32_t rank : {0u, 1u, 3u}) {
    CHECK(scheduler.apply(ranks.make(ReportKind::kComputeRelease, rank, 2)) == ReportVerdict::kApplied);
  }
  CHECK(reusable(scheduler).empty());
  CHECK(scheduler.apply(ranks.make(ReportKind::kComputeRelease, 2, 2)) == ReportVerdict::kApplied);
  CHECK(reusable(scheduler) == std::vector<ChunkId>{5});
  JobId after = scheduler.dispatch(JobKind::kLoad, kJobChunks);
  report_all(scheduler, ranks, ReportKind::kCopyComplete, after);
  CHECK(completed(scheduler) == std::vector<JobId>{after});
}

TEST_CASE("a rank exiting without warning fails and settles its jobs at once") {
  OffloadScheduler scheduler(config(2, 1, 4));
  Ranks ranks(2);
  JobId job = scheduler.dispatch(JobKind::kLoad, kJobChunks);
  CHECK(scheduler.apply(ranks.make(ReportKind::kCopyComplete, 0, job)) == ReportVerdict::kApplied);
  scheduler.rank_exited(1);
  std::vector<FailedJob> failures = failed(scheduler);
  REQUIRE(failures.size() == 1);
  CHECK(failures[0].rank == 1);
  CHECK(scheduler.holds_clear());
  CHECK(scheduler.figures().exited_ranks == 1);
  CHECK_THROWS_AS(scheduler.rank_exited(2), Error);
  CHECK_THROWS_AS(scheduler.rank_unresponsive(2), Error);
}

TEST_CASE("detach makes a rank unresponsive; attach records the pid") {
  OffloadScheduler scheduler(config(2, 1, 4));
  Ranks ranks(2);
  CHECK(scheduler.apply(ranks.make(ReportKind::kAttach, 0, 100)) == ReportVerdict::kApplied);
  CHECK(scheduler.apply(ranks.make(ReportKind::kAttach, 0, 100)) == ReportVerdict::kApplied);
  CHECK(scheduler.rank_pid(0) == 100);
  CHECK(scheduler.apply(ranks.make(ReportKind::kHeartbeat, 0, 5)) == ReportVerdict::kApplied);
  JobId job = scheduler.dispatch(JobKind::kStore, kJobChunks);
  CHECK(scheduler.apply(ranks.make(ReportKind::kDetach, 1, 200)) == ReportVerdict::kApplied);
  CHECK(scheduler.rank_state(1) == RankLiveness::kUnresponsive);
  CHECK(scheduler.pins().quarantined(1));
  CHECK(scheduler.apply(ranks.make(ReportKind::kDetach, 1, 200)) == ReportVerdict::kRankNotLive);
  CHECK(failed(scheduler).at(0).job == job);
}

TEST_CASE("jobs sent while a rank was live settle through its exit even when it never saw them") {
  // Rank 1 died before picking up either job: both fail, and the exit releases both.
  OffloadScheduler scheduler(config(1, 2, 4));
  JobId first = scheduler.dispatch(JobKind::kStore, std::vector<ChunkId>{0, 0});
  JobId second = scheduler.dispatch(JobKind::kLoad, std::vector<ChunkId>{0});
  CHECK(scheduler.pins().holds(0) == 3);
  scheduler.rank_unresponsive(1);
  CHECK(scheduler.pins().quarantined_holds(0) == 3);
  Ranks ranks(2);
  CHECK(scheduler.apply(ranks.make(ReportKind::kCopyComplete, 0, first)) == ReportVerdict::kApplied);
  CHECK(scheduler.apply(ranks.make(ReportKind::kCopyComplete, 0, second)) == ReportVerdict::kApplied);
  CHECK(scheduler.pins().holds(0) == 3);
  scheduler.rank_exited(1);
  CHECK(scheduler.holds_clear());
  CHECK(failed(scheduler).size() == 2);
}

TEST_CASE("a second process attaching to a live rank makes it unresponsive: its jobs wait for the first one's exit") {
  // The worker was replaced before its death was seen (the replacement could claim the rank):
  // the old process may still be copying into the job's chunks.
  OffloadScheduler scheduler(config(2, 1, 4));
  Ranks ranks(2);
  CHECK(scheduler.apply(ranks.make(ReportKind::kAttach, 0, 100)) == ReportVerdict::kApplied);
  JobId job = scheduler.dispatch(JobKind::kStore, kJobChunks);
  CHECK(scheduler.apply(ranks.make(ReportKind::kAttach, 0, 101)) == ReportVerdict::kRankNotExited);
  CHECK(scheduler.rank_state(0) == RankLiveness::kUnresponsive);
  CHECK(failed(scheduler).at(0).job == job);
  CHECK(scheduler.pins().quarantined(kJobChunks[0]));
  // Nothing of the rank is trusted now: not its reports, not a new job.
  CHECK(scheduler.apply(ranks.make(ReportKind::kCopyComplete, 0, job)) == ReportVerdict::kRankNotLive);
  CHECK_THROWS_AS(scheduler.dispatch(JobKind::kStore, kJobChunks), Error);
  CHECK(scheduler.apply(ranks.make(ReportKind::kCopyComplete, 1, job)) == ReportVerdict::kApplied);
  CHECK_FALSE(scheduler.holds_clear());  // the old process may still copy
  scheduler.rank_exited(0);
  CHECK(scheduler.holds_clear());
  // The replacement attaches again after the exit and is live.
  ranks.restart(0);
  CHECK(scheduler.apply(ranks.make(ReportKind::kAttach, 0, 101)) == ReportVerdict::kApplied);
  CHECK(scheduler.rank_state(0) == RankLiveness::kLive);
}

TEST_CASE("the exited process's own attach, read late from its ring, does not revive the rank") {
  OffloadScheduler scheduler(config(2, 1, 4));
  Ranks ranks(2);
  CHECK(scheduler.apply(ranks.make(ReportKind::kAttach, 0, 100)) == ReportVerdict::kApplied);
  scheduler.rank_exited(0);
  ranks.restart(0);
  CHECK(scheduler.apply(ranks.make(ReportKind::kAttach, 0, 100)) == ReportVerdict::kSequenceReplay);
  CHECK(scheduler.rank_state(0) == RankLiveness::kExited);
  CHECK(scheduler.apply(ranks.make(ReportKind::kAttach, 0, 102)) == ReportVerdict::kApplied);
  CHECK(scheduler.rank_state(0) == RankLiveness::kLive);
  CHECK(scheduler.rank_pid(0) == 102);
}

}  // namespace hugepin
