#include "protocol/copy_pins.h"

#include <doctest/doctest.h>

#include <vector>

namespace hugepin {
namespace {

std::vector<ChunkId> taken(CopyPins& pins) {
  std::vector<ChunkId> out;
  pins.take_reusable(&out);
  return out;
}

}  // namespace

TEST_CASE("copy pins count holds per chunk, a chunk listed twice held twice") {
  CopyPins pins(4);
  CHECK(pins.holds_clear());
  std::vector<ChunkId> job{1, 2, 2};
  pins.pin(job);
  CHECK(pins.holds(1) == 1);
  CHECK(pins.holds(2) == 2);
  CHECK(pins.pinned_chunks() == 2);
  CHECK(pins.total_holds() == 3);
  CHECK_FALSE(pins.holds_clear());
  pins.unpin(job);
  CHECK(pins.holds_clear());
  CHECK(pins.pinned_chunks() == 0);
}

TEST_CASE("pin is all or nothing: a bad chunk anywhere pins nothing") {
  CopyPins pins(4);
  pins.retire(3);
  std::vector<ChunkId> retired_last{0, 1, 3};
  CHECK_THROWS_WITH_AS(pins.pin(retired_last), "cannot pin chunk 3: it is retired, not active (the engine retired it)",
                       Error);
  std::vector<ChunkId> out_of_range{0, 9};
  CHECK_THROWS_WITH_AS(pins.pin(out_of_range), "chunk 9 is out of range: the plan has 4 chunks", Error);
  CHECK(pins.holds_clear());
  CHECK(pins.holds(0) == 0);
  CHECK(pins.pinned_chunks() == 0);
}

TEST_CASE("unpin is all or nothing: more unpins than holds changes nothing") {
  CopyPins pins(4);
  std::vector<ChunkId> once{0, 1};
  pins.pin(once);
  std::vector<ChunkId> twice{0, 1, 1};
  CHECK_THROWS_WITH_AS(pins.unpin(twice), "cannot unpin chunk 1: listed more often than its 1 unquarantined holds", Error);
  CHECK(pins.holds(0) == 1);
  CHECK(pins.holds(1) == 1);
  CHECK(pins.pinned_chunks() == 2);
  CHECK(pins.total_holds() == 2);
}

TEST_CASE("a failed unpin also takes back the chunks it had made reusable") {
  CopyPins pins(3);
  std::vector<ChunkId> held{0, 2};
  pins.pin(held);
  pins.retire(0);
  pins.fence_passed(0);  // fenced: waits for its hold
  std::vector<ChunkId> bad{0, 1};  // chunk 1 has no hold
  CHECK_THROWS_AS(pins.unpin(bad), Error);
  CHECK(pins.state(0) == ChunkState::kFenced);
  CHECK(pins.holds(0) == 1);
  CHECK(pins.fenced_chunks() == 1);
  CHECK(pins.reusable_chunks() == 0);
  CHECK(pins.pinned_chunks() == 2);
  pins.unpin(held);
  CHECK(taken(pins) == std::vector<ChunkId>{0});
}

TEST_CASE("a retired chunk with no holds becomes reusable when the fence passes, once") {
  CopyPins pins(2);
  pins.retire(0);
  CHECK(pins.state(0) == ChunkState::kRetired);
  CHECK(pins.retired_chunks() == 1);
  CHECK_THROWS_AS(pins.retire(0), Error);  // retired twice
  pins.fence_passed(0);
  CHECK(pins.state(0) == ChunkState::kReusable);
  CHECK(pins.reusable_chunks() == 1);
  CHECK_THROWS_AS(pins.retire(0), Error);  // not taken back yet
  CHECK(taken(pins) == std::vector<ChunkId>{0});
  CHECK(pins.state(0) == ChunkState::kActive);
  CHECK(taken(pins).empty());  // never handed out twice
  CHECK_THROWS_AS(pins.fence_passed(0), Error);  // not retired
}

TEST_CASE("a held chunk past its fence waits for the last unpin") {
  CopyPins pins(2);
  std::vector<ChunkId> a{1}, b{1};
  pins.pin(a);
  pins.pin(b);
  pins.retire(1);
  pins.fence_passed(1);
  CHECK(pins.state(1) == ChunkState::kFenced);
  CHECK(pins.fenced_chunks() == 1);
  pins.unpin(a);
  CHECK(pins.state(1) == ChunkState::kFenced);
  CHECK(taken(pins).empty());
  pins.unpin(b);
  CHECK(pins.state(1) == ChunkState::kReusable);
  CHECK(pins.fenced_chunks() == 0);
  CHECK(taken(pins) == std::vector<ChunkId>{1});
}

TEST_CASE("a held chunk retired before its fence: unpin alone does not release it") {
  CopyPins pins(1);
  std::vector<ChunkId> job{0};
  pins.pin(job);
  pins.retire(0);
  pins.unpin(job);
  CHECK(pins.state(0) == ChunkState::kRetired);
  CHECK(taken(pins).empty());
}

TEST_CASE("quarantined holds block new pins and cannot be unpinned until the quarantine ends") {
  CopyPins pins(3);
  std::vector<ChunkId> job{0, 1};
  pins.pin(job);
  pins.quarantine(job);
  CHECK(pins.quarantined(0));
  CHECK(pins.quarantined_chunks() == 2);
  std::vector<ChunkId> zero{0};
  CHECK_THROWS_WITH_AS(pins.pin(zero), "cannot pin chunk 0: it is quarantined until an unresponsive rank's process exits",
                       Error);
  CHECK_THROWS_AS(pins.unpin(job), Error);
  CHECK_THROWS_AS(pins.quarantine(job), Error);  // every hold is quarantined already
  CHECK(pins.quarantined_holds(0) == 1);
  pins.unquarantine(job);
  CHECK(pins.quarantined_chunks() == 0);
  CHECK_THROWS_AS(pins.unquarantine(job), Error);
  pins.unpin(job);
  CHECK(pins.holds_clear());
}

TEST_CASE("zero chunks is refused") { CHECK_THROWS_AS(CopyPins(0), Error); }

}  // namespace hugepin
