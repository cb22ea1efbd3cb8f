// Checking and adopting arenas in one process: consistent ones get a new generation, inconsistent
// ones go to quarantine with every byte kept, young or inaccessible ones are left alone.
#include "daemon/adopt.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/pattern.h"
#include "daemon/quarantine.h"
#include "hugemem/naming.h"
#include "ipc/control_layout.h"
#include "ipc/inspect.h"
#include "ipc/rank_attachment.h"
#include "ipc/test_arena.h"
#include "tests/support/file_text.h"

namespace hugepin::daemon {
namespace {

constexpr uint64_t kSeed = 0x5eed;

AdoptOptions scope(const test::TestArena& arena, int64_t grace_ns = 0) {
  return {arena.options(), arena.name(), grace_ns};
}

// Removes the quarantine entries of `arena` (tests clean up what they quarantined).
void remove_quarantine(const test::TestArena& arena) {
  for (const QuarantineEntry& entry : list_quarantine(real_os(), arena.name())) {
    std::filesystem::remove_all(entry.path);
  }
}

std::string region_path(const test::TestArena& arena, uint32_t rank) {
  return cat(arena_data_dir(arena.dir(), arena.name()), "/", region_file_name(rank));
}

// Fills rank 0's region with the test pattern from a worker process.
void fill_rank0(const test::TestArena& arena) {
  REQUIRE(test::run_in_child([&] {
            RankAttachment worker = test::attach_rank(arena, 0, 0);
            fill_pattern(worker.region().data(), worker.region().size(), kSeed);
            worker.detach();
            return true;
          }) == 0);
}

}  // namespace

TEST_CASE("a consistent arena is adopted: its generation goes up, its data stays") {
  test::TestArena arena("adopt-ok");
  fill_rank0(arena);
  ArenaCheck check = check_arena(real_os(), arena.name(), true);
  CHECK(check.health == ArenaHealth::kConsistent);
  CHECK(check.reason.empty());
  CHECK(check.recorded_paths.size() == 2);
  CHECK(check.owner_uid == geteuid());
  CHECK(check.mode == 0600);
  const uint64_t before = inspect_arena(real_os(), arena.name()).generation;

  AdoptionReport report = adopt_arenas(real_os(), scope(arena), 0);
  REQUIRE(report.adopted.size() == 1);
  CHECK(report.adopted[0].name == arena.name());
  CHECK(report.adopted[0].generation == before + 1);
  CHECK(inspect_arena(real_os(), arena.name()).generation == before + 1);
  CHECK(report.quarantined.empty());
  CHECK(report.left_alone.empty());

  MappedRegion region = open_region(real_os(), arena.name(), 0, false, arena.options());
  CHECK_FALSE(find_pattern_mismatch(region.data(), region.size(), kSeed).has_value());
}

TEST_CASE("a truncated region file makes the arena inconsistent: quarantined, nothing deleted") {
  test::TestArena arena("adopt-truncated");
  fill_rank0(arena);
  const std::string rank1 = region_path(arena, 1);
  REQUIRE(truncate(rank1.c_str(), 4096) == 0);
  ArenaCheck check = check_arena(real_os(), arena.name(), true);
  CHECK(check.health == ArenaHealth::kInconsistent);
  CHECK(check.reason.find(cat("rank 1's region file ", rank1, " is 4096 bytes, the segment records ")) == 0);

  // Younger than the grace: left where it is.
  AdoptionReport young = adopt_arenas(real_os(), scope(arena, 3600LL * 1'000'000'000), 0);
  REQUIRE(young.left_alone.size() == 1);
  CHECK(young.left_alone[0].reason.find("younger than the grace") != std::string::npos);
  CHECK(access(control_segment_path(arena.name()).c_str(), F_OK) == 0);

  AdoptionReport report = adopt_arenas(real_os(), scope(arena), 1'700'000'000LL * 1'000'000'000);
  REQUIRE(report.quarantined.size() == 1);
  const QuarantineEntry& entry = report.quarantined[0];
  CHECK(entry.arena == arena.name());
  CHECK(entry.name == arena.name() + ".20231114T221320Z");
  CHECK(access(control_segment_path(arena.name()).c_str(), F_OK) != 0);
  CHECK(access((entry.path + "/control-segment").c_str(), F_OK) == 0);
  const std::string moved_dir = cat(arena.dir(), "/hugepin/.quarantine/", entry.name);
  CHECK(access(cat(moved_dir, "/rank-1").c_str(), F_OK) == 0);
  CHECK(access(arena_data_dir(arena.dir(), arena.name()).c_str(), F_OK) != 0);
  const std::string reason = test::file_text(entry.path + "/reason");
  CHECK(reason.find(check.reason) == 0);
  CHECK(reason.find(cat("moved: ", arena_data_dir(arena.dir(), arena.name()), " -> ", moved_dir)) != std::string::npos);

  // Every byte kept: rank 0's data, read where quarantine put it.
  MappedRegion region = MappedRegion::open(real_os(), moved_dir + "/rank-0", false);
  CHECK_FALSE(find_pattern_mismatch(region.data(), region.size(), kSeed).has_value());

  std::vector<QuarantineEntry> listed = list_quarantine(real_os(), arena.name());
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].arena == arena.name());
  CHECK(listed[0].reason == entry.reason);
  CHECK(listed[0].moved.size() == 2);
  // The arena is gone from the arenas: a second adoption finds nothing.
  AdoptionReport again = adopt_arenas(real_os(), scope(arena), 0);
  CHECK(again.adopted.empty());
  CHECK(again.quarantined.empty());
  remove_quarantine(arena);
}

TEST_CASE("a segment that does not parse is quarantined too; a second entry of the same second gets its own name") {
  test::TestArena arena("adopt-corrupt");
  REQUIRE(truncate(control_segment_path(arena.name()).c_str(), 64) == 0);
  ArenaCheck check = check_arena(real_os(), arena.name(), true);
  CHECK(check.health == ArenaHealth::kInconsistent);
  CHECK(check.reason.find("too short") != std::string::npos);
  AdoptionReport report = adopt_arenas(real_os(), scope(arena), 1'700'000'000LL * 1'000'000'000);
  REQUIRE(report.quarantined.size() == 1);
  CHECK(report.quarantined[0].moved.size() == 2);  // the segment and the data directory found by name

  // Nothing left to move: an error, and no entry.
  CHECK_THROWS_WITH_AS(quarantine_arena(real_os(), arena.name(), "by hand", {}, 1'700'000'000LL * 1'000'000'000),
                       doctest::Contains("none of its files exists any more"), Error);
  const std::string dir = arena_data_dir(arena.dir(), arena.name());
  REQUIRE(mkdir(dir.c_str(), 0700) == 0);
  QuarantineEntry second = quarantine_arena(real_os(), arena.name(), "by hand", {dir}, 1'700'000'000LL * 1'000'000'000 + 1);
  CHECK(second.name == arena.name() + ".20231114T221320Z.2");
  CHECK(list_quarantine(real_os(), arena.name()).size() == 2);  // the failed attempt left no entry
  remove_quarantine(arena);
}

TEST_CASE("a segment without data, and arenas outside the prefix, are left alone") {
  test::TestArena arena("adopt-nodata");
  const std::string dir = arena_data_dir(arena.dir(), arena.name());
  std::filesystem::remove_all(dir);
  CHECK(check_arena(real_os(), arena.name(), true).health == ArenaHealth::kNoData);
  AdoptionReport report = adopt_arenas(real_os(), scope(arena), 0);
  REQUIRE(report.left_alone.size() == 1);
  CHECK(report.left_alone[0].health == ArenaHealth::kNoData);
  CHECK(access(control_segment_path(arena.name()).c_str(), F_OK) == 0);

  test::TestArena other("adopt-scope");
  const uint64_t before = inspect_arena(real_os(), other.name()).generation;
  AdoptionReport none = adopt_arenas(real_os(), {other.options(), other.name() + "-x", 0}, 0);
  CHECK(none.adopted.empty());
  CHECK(inspect_arena(real_os(), other.name()).generation == before);
}

TEST_CASE("an arena the process may not write is inaccessible, and left alone") {
  test::TestArena arena("adopt-private");
  // As nobody, a root arena of mode 0600 cannot be opened for writing.
  CHECK(test::run_in_child([&] {
          if (setgid(65534) != 0 || setuid(65534) != 0) return false;
          ArenaCheck check = check_arena(real_os(), arena.name(), true);
          AdoptionReport report = adopt_arenas(real_os(), scope(arena), 0);
          return check.health == ArenaHealth::kInaccessible && check.reason.find("only that user") != std::string::npos &&
                 report.adopted.empty() && report.quarantined.empty() && report.left_alone.size() == 1;
        }) == 0);
  CHECK(access(control_segment_path(arena.name()).c_str(), F_OK) == 0);
}

}  // namespace hugepin::daemon

namespace hugepin::daemon {

TEST_CASE("quarantine of an arena whose data lives under /dev/shm itself keeps both segment and data") {
  // With /dev/shm as the data root, the data's quarantine place is the index entry itself: the
  // data must go inside it, not fail beside it (it was left behind, looking stale).
  const std::string name = cat("t", getpid(), "-qshm");
  const std::string dir = arena_data_dir("/dev/shm", name);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/rank-0") << "kv";
  std::ofstream(control_segment_path(name)) << "not a segment";
  QuarantineEntry entry = quarantine_arena(real_os(), name, "test", {dir}, 1'700'000'000LL * 1'000'000'000);
  CHECK(entry.moved.size() == 2);
  CHECK_FALSE(std::filesystem::exists(dir));
  CHECK_FALSE(std::filesystem::exists(control_segment_path(name)));
  CHECK(test::file_text(entry.path + "/data/rank-0") == "kv");
  CHECK(test::file_text(entry.path + "/control-segment") == "not a segment");
  std::filesystem::remove_all(entry.path);
}

TEST_CASE("a quarantine that can move only part of an arena puts it back and fails") {
  const std::string name = cat("t", getpid(), "-qpart");
  test::TempDir root("/tmp");
  const std::string dir = arena_data_dir(root.path(), name);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/rank-0") << "kv";
  std::ofstream(control_segment_path(name)) << "segment";
  // The data's place in quarantine is taken (and not empty): its rename fails.
  const int64_t when = 1'700'000'000LL * 1'000'000'000;
  const std::string taken = cat(root.path(), "/hugepin/.quarantine/", name, ".20231114T221320Z");
  std::filesystem::create_directories(taken + "/x");
  CHECK_THROWS_WITH_AS(quarantine_arena(real_os(), name, "test", {dir}, when), doctest::Contains("left as it was"),
                       Error);
  CHECK(test::file_text(control_segment_path(name)) == "segment");  // moved back
  CHECK(test::file_text(dir + "/rank-0") == "kv");
  CHECK(list_quarantine(real_os(), name).empty());
  std::filesystem::remove(control_segment_path(name));
}

}  // namespace hugepin::daemon

namespace hugepin::daemon {

TEST_CASE("a segment of another layout version is left alone, neither adopted nor quarantined") {
  test::TestArena arena("adopt-version");
  {
    // The control block sits at the first 128-byte boundary whose magic and self offset agree.
    const std::string path = control_segment_path(arena.name());
    std::string bytes = test::file_text(path);
    size_t at = std::string::npos;
    for (size_t offset = 0; offset + sizeof(ControlBlock) <= bytes.size(); offset += alignof(ControlBlock)) {
      uint64_t magic = 0;
      uint64_t self = 0;
      std::memcpy(&magic, bytes.data() + offset + offsetof(ControlBlock, magic), sizeof magic);
      std::memcpy(&self, bytes.data() + offset + offsetof(ControlBlock, self_offset), sizeof self);
      if (magic == kControlMagic && self == offset) {
        at = offset;
        break;
      }
    }
    REQUIRE(at != std::string::npos);
    std::fstream segment(path, std::ios::in | std::ios::out | std::ios::binary);
    const uint32_t other_version = kControlLayoutVersion + 1;
    segment.seekp(static_cast<std::streamoff>(at + offsetof(ControlBlock, layout_version)));
    segment.write(reinterpret_cast<const char*>(&other_version), sizeof other_version);
  }
  ArenaCheck check = check_arena(real_os(), arena.name(), true);
  CHECK(check.health == ArenaHealth::kInaccessible);
  CHECK(check.reason.find("layout version") != std::string::npos);
  AdoptionReport report = adopt_arenas(real_os(), scope(arena), 1'700'000'000LL * 1'000'000'000);
  CHECK(report.quarantined.empty());
  CHECK(report.adopted.empty());
  CHECK(std::filesystem::exists(control_segment_path(arena.name())));
  CHECK(list_quarantine(real_os(), arena.name()).empty());
}

}  // namespace hugepin::daemon

namespace hugepin::daemon {

TEST_CASE("quarantine refuses a .quarantine directory someone else made, and leaves the arena as it was") {
  const std::string name = cat("t", getpid(), "-qforeign");
  test::TempDir root("/tmp");
  const std::string dir = arena_data_dir(root.path(), name);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/rank-0") << "kv";
  std::ofstream(control_segment_path(name)) << "segment";
  // Another user got there first, and left it open to all.
  const std::string foreign = root.path() + "/hugepin/.quarantine";
  REQUIRE(mkdir(foreign.c_str(), 0777) == 0);
  REQUIRE(chmod(foreign.c_str(), 0777) == 0);
  REQUIRE(chown(foreign.c_str(), 65534, 65534) == 0);
  CHECK_THROWS_WITH_AS(quarantine_arena(real_os(), name, "test", {dir}, 1'700'000'000LL * 1'000'000'000),
                       doctest::Contains("not hugepind's own"), Error);
  CHECK(test::file_text(control_segment_path(name)) == "segment");
  CHECK(test::file_text(dir + "/rank-0") == "kv");
  std::filesystem::remove(control_segment_path(name));
}

}  // namespace hugepin::daemon
