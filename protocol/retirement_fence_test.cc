#include "protocol/retirement_fence.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace hugepin {

TEST_CASE("epochs start at 1 and only closed epochs may be released, each rank forward") {
  RetirementFence fence(2, 4, ComputeBarrier::kRequired);
  CHECK(fence.current_epoch() == 1);
  CHECK(fence.all_rank_epoch() == 0);
  CHECK(fence.release(0, 1) == ReportVerdict::kEpochNotClosed);
  CHECK(fence.begin_epoch() == 2);
  CHECK(fence.release(0, 0) == ReportVerdict::kEpochNotAdvancing);
  CHECK(fence.release(0, 1) == ReportVerdict::kApplied);
  CHECK(fence.release(0, 1) == ReportVerdict::kEpochNotAdvancing);
  CHECK(fence.released(0) == 1);
  CHECK(fence.all_rank_epoch() == 0);  // rank 1 has not released
  CHECK(fence.release(1, 1) == ReportVerdict::kApplied);
  CHECK(fence.all_rank_epoch() == 1);
}

TEST_CASE("a chunk passes when every rank released its stamp; queue order is retire order") {
  RetirementFence fence(2, 4, ComputeBarrier::kRequired);
  fence.retire(3);  // stamp 1
  fence.begin_epoch();
  fence.retire(1);  // stamp 2
  CHECK(fence.stamp(3) == 1);
  CHECK(fence.stamp(1) == 2);
  CHECK(fence.waiting() == 2);
  CHECK_THROWS_AS(fence.retire(3), Error);
  CHECK_FALSE(fence.front_passed());
  CHECK_THROWS_AS(fence.pop_passed(), Error);
  fence.begin_epoch();
  fence.release(0, 2);  // ranks may skip epochs: 2 covers 1
  CHECK_FALSE(fence.front_passed());
  fence.release(1, 1);
  REQUIRE(fence.front_passed());
  CHECK(fence.pop_passed() == 3);
  CHECK_FALSE(fence.front_passed());
  fence.release(1, 2);
  CHECK(fence.pop_passed() == 1);
  CHECK(fence.waiting() == 0);
}

TEST_CASE("a waived barrier lets a chunk pass at once") {
  RetirementFence fence(4, 2, ComputeBarrier::kWaived);
  fence.retire(0);
  CHECK(fence.stamp(0) == 0);
  REQUIRE(fence.front_passed());
  CHECK(fence.pop_passed() == 0);
}

TEST_CASE("a departed rank stops holding the epoch back; a replacement joins at current - 1") {
  RetirementFence fence(3, 2, ComputeBarrier::kRequired);
  for (int i = 0; i < 4; ++i) fence.begin_epoch();  // current 5
  fence.release(0, 4);
  fence.release(2, 3);
  CHECK(fence.all_rank_epoch() == 0);  // rank 1 is stuck at 0
  fence.leave(1);
  CHECK(fence.all_rank_epoch() == 3);
  fence.leave(1);  // no-op
  CHECK(fence.members() == 2);
  fence.join(1);
  CHECK(fence.released(1) == 4);
  CHECK(fence.all_rank_epoch() == 3);
  fence.leave(0);
  fence.leave(1);
  fence.leave(2);
  CHECK(fence.members() == 0);
  CHECK(fence.all_rank_epoch() == 4);  // nobody left to wait for: every closed epoch
  fence.begin_epoch();
  CHECK(fence.all_rank_epoch() == 5);
  fence.retire(0);  // stamp 6
  fence.join(2);    // released 5
  fence.begin_epoch();
  CHECK_FALSE(fence.front_passed());
  fence.release(2, 6);
  CHECK(fence.front_passed());
}

TEST_CASE("the all-rank epoch equals the minimum over members, also past the window and after regrowth") {
  // Against the obvious definition, over random releases, departures and joins; rank 0 releases
  // rarely, so it lags far beyond the initial 16-epoch window and the ring regrows.
  constexpr uint32_t kRanks = 7;
  std::mt19937_64 random(42);
  RetirementFence fence(kRanks, 1, ComputeBarrier::kRequired);
  std::vector<Epoch> released(kRanks, 0);
  std::vector<bool> member(kRanks, true);
  for (int step = 0; step < 20000; ++step) {
    uint32_t rank = static_cast<uint32_t>(random() % kRanks);
    switch (random() % 8) {
      case 0:
      case 1:
        fence.begin_epoch();
        break;
      case 2:
        if (member[rank] && random() % 50 == 0) {
          fence.leave(rank);
          member[rank] = false;
        } else if (!member[rank]) {
          fence.join(rank);
          member[rank] = true;
          released[rank] = fence.current_epoch() - 1;
        }
        break;
      default:
        if (member[rank] && released[rank] + 1 < fence.current_epoch() && (rank != 0 || random() % 40 == 0)) {
          Epoch epoch = released[rank] + 1 + random() % (fence.current_epoch() - released[rank] - 1);
          REQUIRE(fence.release(rank, epoch) == ReportVerdict::kApplied);
          released[rank] = epoch;
        }
    }
    Epoch expected = fence.current_epoch() - 1;
    for (uint32_t r = 0; r < kRanks; ++r) {
      if (member[r]) expected = std::min(expected, released[r]);
    }
    REQUIRE(fence.all_rank_epoch() == expected);
  }
}

TEST_CASE("bad sizes are refused") {
  CHECK_THROWS_AS(RetirementFence(0, 1, ComputeBarrier::kRequired), Error);
  CHECK_THROWS_AS(RetirementFence(1, 0, ComputeBarrier::kRequired), Error);
  RetirementFence fence(1, 1, ComputeBarrier::kRequired);
  CHECK_THROWS_AS(fence.retire(1), Error);
}

}  // namespace hugepin

namespace hugepin {

TEST_CASE("releases_before_advance: the slowest members each owe a release before the all-rank epoch moves") {
  RetirementFence fence(3, 4, ComputeBarrier::kRequired);
  CHECK(fence.releases_before_advance() == 0);  // no closed epoch to release yet
  fence.retire(2);                               // stamp 1
  CHECK(fence.releases_before_advance() == 0);  // epoch 1 is still open: no release can come
  fence.begin_epoch();
  CHECK(fence.releases_before_advance() == 3);
  fence.begin_epoch();  // current 3
  fence.release(0, 2);
  CHECK(fence.releases_before_advance() == 2);
  fence.release(1, 1);
  CHECK(fence.releases_before_advance() == 1);
  fence.leave(2);  // its process is gone: it owes nothing
  CHECK(fence.front_passed());
  CHECK(fence.releases_before_advance() == 1);  // rank 1 is still behind closed epoch 2
  fence.release(1, 2);
  CHECK(fence.releases_before_advance() == 0);  // every closed epoch released

  RetirementFence waived(2, 4, ComputeBarrier::kWaived);  // the epoch still advances on releases
  waived.begin_epoch();
  CHECK(waived.releases_before_advance() == 2);
}

}  // namespace hugepin
