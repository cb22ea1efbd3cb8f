#include "protocol/copy_tracker.h"

#include <doctest/doctest.h>

#include <vector>

namespace hugepin {
namespace {

// A fake stream: events up to `finished` are done; wait() finishes up to its event.
struct FakeStream {
  uint64_t finished = 0;
  int queries = 0;
  bool broken = false;
  CopyTracker tracker(uint16_t rank) {
    return CopyTracker(
        rank,
        [this](uint64_t event) {
          ++queries;
          if (broken) throw Error("device lost");
          return event <= finished;
        },
        [this](uint64_t event) {
          if (broken) throw Error("device lost");
          if (event > finished) finished = event;
        });
  }
};

std::vector<Report> poll(CopyTracker& tracker) {
  std::vector<Report> out;
  tracker.poll(&out);
  return out;
}

}  // namespace

TEST_CASE("finished copies become copy-complete reports in launch order, up to the first unfinished") {
  FakeStream stream;
  CopyTracker tracker = stream.tracker(3);
  tracker.copy_launched(10, 1);
  tracker.copy_launched(11, 2);
  tracker.copy_launched(12, 3);
  CHECK(poll(tracker).empty());
  CHECK(tracker.high_water_mark() == 0);
  stream.finished = 2;
  std::vector<Report> reports = poll(tracker);
  REQUIRE(reports.size() == 2);
  CHECK(reports[0].kind == ReportKind::kCopyComplete);
  CHECK(reports[0].rank == 3);
  CHECK(reports[0].value == 10);
  CHECK(reports[0].sequence == 0);  // the ring stamps it
  CHECK(reports[1].value == 11);
  CHECK(tracker.high_water_mark() == 2);
  CHECK(tracker.pending() == 1);
  CHECK(poll(tracker).empty());
}

TEST_CASE("polling asks only about unfinished events past the high-water mark") {
  FakeStream stream;
  CopyTracker tracker = stream.tracker(0);
  for (uint64_t event = 1; event <= 100; ++event) tracker.copy_launched(event, event);
  stream.finished = 100;
  CHECK(poll(tracker).size() == 100);
  CHECK(stream.queries == 100);
  CHECK(poll(tracker).empty());
  CHECK(stream.queries == 100);  // nothing pending: nothing asked
}

TEST_CASE("finished epochs coalesce into one compute-release of the highest") {
  FakeStream stream;
  CopyTracker tracker = stream.tracker(1);
  tracker.epoch_launched(1, 5);
  tracker.epoch_launched(2, 6);
  tracker.epoch_launched(4, 7);
  CHECK_THROWS_AS(tracker.epoch_launched(4, 8), Error);
  stream.finished = 6;
  std::vector<Report> reports = poll(tracker);
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].kind == ReportKind::kComputeRelease);
  CHECK(reports[0].value == 2);
  stream.finished = 7;
  CHECK(poll(tracker).at(0).value == 4);
}

TEST_CASE("events must increase; a failed launch is reported at the next poll with its errno") {
  FakeStream stream;
  CopyTracker tracker = stream.tracker(0);
  CHECK_THROWS_AS(tracker.copy_launched(1, 0), Error);
  tracker.copy_launched(1, 4);
  CHECK_THROWS_WITH_AS(tracker.copy_launched(2, 4), "copy tracker of rank 0: event 4 is not above the last one, 4 "
                                                  "(events start at 1 and increase on one stream)",
                       Error);
  tracker.copy_failed(2, 12);
  std::vector<Report> reports = poll(tracker);
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].kind == ReportKind::kCopyFailed);
  CHECK(reports[0].value == 2);
  CHECK(reports[0].flags == 12);
  CHECK(tracker.pending() == 1);
}

TEST_CASE("flush waits for the newest event and reports everything") {
  FakeStream stream;
  CopyTracker tracker = stream.tracker(0);
  tracker.copy_launched(7, 1);
  tracker.epoch_launched(3, 2);
  tracker.copy_launched(8, 3);
  std::vector<Report> reports;
  CHECK(tracker.flush(&reports) == 3);
  CHECK(stream.finished == 3);
  CHECK(tracker.pending() == 0);
  CHECK(tracker.high_water_mark() == 3);
  CHECK(reports[0].value == 7);
  CHECK(reports[1].value == 8);
  CHECK(reports[2].kind == ReportKind::kComputeRelease);
  CHECK(tracker.flush(&reports) == 0);
}

TEST_CASE("a failing query or wait leaves the tracker as it was") {
  FakeStream stream;
  CopyTracker tracker = stream.tracker(0);
  tracker.copy_launched(1, 1);
  tracker.copy_launched(2, 2);
  stream.finished = 1;
  stream.broken = true;
  std::vector<Report> reports;
  CHECK_THROWS_AS(tracker.poll(&reports), Error);
  CHECK_THROWS_AS(tracker.flush(&reports), Error);
  CHECK(tracker.pending() == 2);
  CHECK(reports.empty());
  stream.broken = false;
  CHECK(poll(tracker).size() == 1);
}

TEST_CASE("callbacks are required") {
  CHECK_THROWS_AS(CopyTracker(0, nullptr, [](uint64_t) {}), Error);
}

}  // namespace hugepin
