#include "protocol/completion_quorum.h"

#include <doctest/doctest.h>

#include <vector>

namespace hugepin {

namespace {
const std::vector<ChunkId> kChunks{4, 5};
}  // namespace

TEST_CASE("a job completes when every rank reported, exactly then") {
  CompletionQuorum quorum(3, 8);
  JobId job = quorum.open(JobKind::kStore, kChunks);
  CHECK(job == 1);
  CHECK(quorum.waiting_jobs() == 1);
  CHECK_FALSE(quorum.record(job, 0, true).settled);
  CHECK_FALSE(quorum.record(job, 2, true).settled);
  CompletionQuorum::Outcome last = quorum.record(job, 1, true);
  CHECK(last.verdict == ReportVerdict::kApplied);
  CHECK(last.settled);
  CHECK_FALSE(last.failed_now);
  REQUIRE(quorum.find(job) != nullptr);
  CHECK(quorum.find(job)->chunks == kChunks);
  CHECK_FALSE(quorum.find(job)->failed);
  quorum.close(job);
  CHECK(quorum.find(job) == nullptr);
  CHECK(quorum.open_jobs() == 0);
}

TEST_CASE("duplicates and unknown jobs are rejected and change nothing") {
  CompletionQuorum quorum(2, 4);
  JobId job = quorum.open(JobKind::kLoad, kChunks);
  CHECK(quorum.record(job, 0, true).verdict == ReportVerdict::kApplied);
  CHECK(quorum.record(job, 0, true).verdict == ReportVerdict::kDuplicate);
  CHECK(quorum.record(job, 0, false).verdict == ReportVerdict::kDuplicate);
  CHECK_FALSE(quorum.find(job)->failed);
  CHECK(quorum.find(job)->unsettled == 1);
  CHECK(quorum.record(0, 0, true).verdict == ReportVerdict::kUnknownJob);
  CHECK(quorum.record(job + 1, 0, true).verdict == ReportVerdict::kUnknownJob);
  CHECK(quorum.record(job + 4, 0, true).verdict == ReportVerdict::kUnknownJob);  // same slot, other id
  CHECK(quorum.record(job, 1, true).settled);
  quorum.close(job);
  CHECK(quorum.record(job, 1, true).verdict == ReportVerdict::kUnknownJob);  // settled: gone
}

TEST_CASE("a failed job still waits for every rank before it settles") {
  CompletionQuorum quorum(3, 4);
  JobId job = quorum.open(JobKind::kStore, kChunks);
  CompletionQuorum::Outcome failed = quorum.record(job, 1, false);
  CHECK(failed.failed_now);
  CHECK_FALSE(failed.settled);
  CHECK(quorum.waiting_jobs() == 0);
  CHECK(quorum.failed_open_jobs() == 1);
  CHECK_FALSE(quorum.record(job, 0, false).failed_now);  // failed once
  CHECK(quorum.record(job, 2, true).settled);             // the live rank's copy is over
  CHECK(quorum.find(job)->failed);
  quorum.close(job);
  CHECK(quorum.failed_open_jobs() == 0);
}

TEST_CASE("settled-rank bitsets span several words") {
  CompletionQuorum quorum(130, 2);
  JobId job = quorum.open(JobKind::kLoad, kChunks);
  for (uint32_t rank = 0; rank < 130; ++rank) {
    if (rank == 64 || rank == 129) continue;
    CHECK_FALSE(quorum.record(job, rank, true).settled);
  }
  CHECK_FALSE(quorum.settled_by(job, 64));
  CHECK(quorum.settled_by(job, 63));
  CHECK(quorum.record(job, 63, true).verdict == ReportVerdict::kDuplicate);
  CHECK(quorum.unsettled_by(129) == std::vector<JobId>{job});
  CHECK_FALSE(quorum.record(job, 129, true).settled);
  CHECK(quorum.record(job, 64, true).settled);
}

TEST_CASE("ids increase, skip slots a slow job still holds, and a full table refuses") {
  CompletionQuorum quorum(1, 4);
  JobId slow = quorum.open(JobKind::kLoad, kChunks);  // id 1, slot 1
  for (int i = 0; i < 3; ++i) {
    JobId job = quorum.open(JobKind::kLoad, kChunks);
    CHECK(quorum.record(job, 0, true).settled);
    quorum.close(job);
  }
  // Ids 2, 3, 4 were used; id 5 maps to the slow job's slot, so the next id is 6.
  JobId next = quorum.open(JobKind::kLoad, kChunks);
  CHECK(next == 6);
  quorum.open(JobKind::kLoad, kChunks);
  quorum.open(JobKind::kLoad, kChunks);
  CHECK(quorum.full());
  CHECK_THROWS_AS(quorum.open(JobKind::kLoad, kChunks), Error);
  CHECK(quorum.open_jobs() == 4);
  CHECK(quorum.find(slow) != nullptr);
}

TEST_CASE("rank death: fail, await exit, settle by exit") {
  CompletionQuorum quorum(2, 4);
  JobId reported = quorum.open(JobKind::kStore, kChunks);
  JobId waiting = quorum.open(JobKind::kStore, kChunks);
  CHECK(quorum.record(reported, 1, true).verdict == ReportVerdict::kApplied);
  CHECK(quorum.unsettled_by(1) == std::vector<JobId>{waiting});
  CHECK(quorum.unsettled_by(0) == std::vector<JobId>{reported, waiting});
  CHECK(quorum.fail(waiting));
  CHECK_FALSE(quorum.fail(waiting));
  CHECK(quorum.await_exit(waiting));
  CHECK_FALSE(quorum.await_exit(waiting));  // a second dead rank: the quarantine began already
  bool over = true;
  CHECK_FALSE(quorum.settle_exited(waiting, 1, true, &over).settled);
  CHECK_FALSE(over);
  CHECK_THROWS_AS(quorum.settle_exited(waiting, 1, true, &over), Error);  // settled already
  CHECK(quorum.settle_exited(waiting, 0, true, &over).settled);
  CHECK(over);
  CHECK_THROWS_AS(quorum.close(reported), Error);  // rank 0 has not settled it
  CHECK_THROWS_AS(quorum.fail(99), Error);
}

TEST_CASE("bad sizes are refused") {
  CHECK_THROWS_AS(CompletionQuorum(0, 4), Error);
  CHECK_THROWS_AS(CompletionQuorum(kMaxRanks + 1, 4), Error);
  CHECK_THROWS_AS(CompletionQuorum(2, 0), Error);
  CHECK(CompletionQuorum(2, 5).capacity() == 8);
}

}  // namespace hugepin

namespace hugepin {

TEST_CASE("fewest_unsettled: no job settles before that many more reports") {
  CompletionQuorum quorum(4, 8);
  CHECK(quorum.fewest_unsettled() == 0);  // nothing open
  const JobId a = quorum.open(JobKind::kStore, kChunks);
  const JobId b = quorum.open(JobKind::kLoad, kChunks);
  CHECK(quorum.fewest_unsettled() == 4);
  quorum.record(b, 0, true);
  quorum.record(b, 1, false);  // a failure settles the rank too
  CHECK(quorum.fewest_unsettled() == 2);
  quorum.record(b, 1, true);  // a duplicate changes nothing
  CHECK(quorum.fewest_unsettled() == 2);
  bool quarantine_over = false;
  quorum.settle_exited(b, 2, false, &quarantine_over);
  CHECK(quorum.fewest_unsettled() == 1);
  CHECK(quorum.record(b, 3, true).settled);
  CHECK(quorum.fewest_unsettled() == 4);  // b waits for close() only; a for every rank
  quorum.close(b);
  quorum.record(a, 3, true);
  CHECK(quorum.fewest_unsettled() == 3);
  for (uint32_t rank = 0; rank < 3; ++rank) quorum.record(a, rank, true);
  CHECK(quorum.fewest_unsettled() == 0);  // settled, not closed: waits for no report
  quorum.close(a);
  CHECK(quorum.fewest_unsettled() == 0);
}

}  // namespace hugepin
