// Stale arena files: detected, listed with their age, removed only when still stale.
#include "ipc/stale_files.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

#include "base/file_locks.h"
#include "hugemem/naming.h"
#include "ipc/test_arena.h"

namespace hugepin {
namespace {

std::optional<StaleArena> find(const std::string& arena, const ArenaOptions& where) {
  for (StaleArena& stale : find_stale_arenas(real_os(), where, arena)) {
    if (stale.arena == arena) return stale;
  }
  return std::nullopt;
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

}  // namespace

TEST_CASE("a complete arena is not stale") {
  test::TestArena arena("stale-ok");
  CHECK_FALSE(find(arena.name(), arena.options()).has_value());
  CHECK_FALSE(remove_stale_arena(real_os(), arena.name(), 0, arena.options()));
  CHECK(exists(control_segment_path(arena.name())));
}

TEST_CASE("data without a segment is stale and removed only when old enough and not in use") {
  test::TestArena arena("stale-data");
  REQUIRE(remove_control_segment(real_os(), arena.name()));
  std::optional<StaleArena> stale = find(arena.name(), arena.options());
  REQUIRE(stale.has_value());
  CHECK(stale->kind == StaleKind::kDataWithoutSegment);
  CHECK(stale_kind_name(stale->kind) == "data-without-segment");
  CHECK(stale->region_files == 2);
  CHECK(stale->bytes > 0);
  CHECK(stale->owner == geteuid());
  CHECK(stale->age_ns >= 0);
  CHECK_FALSE(stale->in_use);
  const std::string dir = arena_data_dir(arena.dir(), arena.name());
  REQUIRE(stale->paths == std::vector<std::string>{dir});

  // Younger than the grace: kept.
  CHECK_FALSE(remove_stale_arena(real_os(), arena.name(), 3600LL * 1'000'000'000, arena.options()));
  CHECK(exists(dir));

  // Locked by a process that maps it (the shim does): in use, kept.
  int fd = open((dir + "/rank-0").c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  REQUIRE(lock_file_for_use(real_os(), fd) == 0);  // as the shim holds what it maps
  CHECK(find(arena.name(), arena.options())->in_use);
  CHECK_FALSE(remove_stale_arena(real_os(), arena.name(), 0, arena.options()));
  close(fd);

  CHECK(remove_stale_arena(real_os(), arena.name(), 0, arena.options()));
  CHECK_FALSE(exists(dir));
  CHECK_FALSE(find(arena.name(), arena.options()).has_value());
}

TEST_CASE("a segment whose region files are all gone is stale; one with some files is not") {
  test::TestArena arena("stale-segment");
  const std::string dir = arena_data_dir(arena.dir(), arena.name());
  REQUIRE(unlink((dir + "/rank-1").c_str()) == 0);
  CHECK_FALSE(find(arena.name(), arena.options()).has_value());  // inconsistent, not stale

  REQUIRE(unlink((dir + "/rank-0").c_str()) == 0);
  REQUIRE(rmdir(dir.c_str()) == 0);
  std::optional<StaleArena> stale = find(arena.name(), arena.options());
  REQUIRE(stale.has_value());
  CHECK(stale->kind == StaleKind::kSegmentWithoutData);
  CHECK(stale->paths == std::vector<std::string>{control_segment_path(arena.name())});
  CHECK(remove_stale_arena(real_os(), arena.name(), 0, arena.options()));
  CHECK_FALSE(exists(control_segment_path(arena.name())));
}

TEST_CASE("a corrupt segment is never stale, and the prefix limits what is looked at") {
  test::TestArena arena("stale-corrupt");
  const std::string segment = control_segment_path(arena.name());
  REQUIRE(truncate(segment.c_str(), 64) == 0);
  const std::string dir = arena_data_dir(arena.dir(), arena.name());
  REQUIRE(unlink((dir + "/rank-0").c_str()) == 0);
  REQUIRE(unlink((dir + "/rank-1").c_str()) == 0);
  REQUIRE(rmdir(dir.c_str()) == 0);
  CHECK_FALSE(find(arena.name(), arena.options()).has_value());

  test::TestArena other("stale-prefix");
  REQUIRE(remove_control_segment(real_os(), other.name()));
  CHECK(find_stale_arenas(real_os(), other.options(), other.name() + "-no-such").empty());
  CHECK(find(other.name(), other.options()).has_value());
}

}  // namespace hugepin
