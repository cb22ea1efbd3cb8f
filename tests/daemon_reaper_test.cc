// hugepind's reaper with a real daemon: a worker killed while attached is marked dead; an arena
// without owner past the retention is destroyed while an owned one, or one a claim holds locked, is
// kept; stale files are
// listed (by the daemon and by `hugepin arena list --stale`) and removed only when configured.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/error.h"
#include "base/file_locks.h"
#include "daemon/protocol.h"
#include "hugemem/naming.h"
#include "ipc/arena_control.h"
#include "ipc/arena_lock.h"
#include "ipc/inspect.h"
#include "ipc/rank_attachment.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/run_command.h"

namespace hugepin {
namespace {

using daemon::Json;

// A worker process that attaches to (arena, tp_rank) and stays until killed; returns its pid once
// attached.
pid_t start_worker(const std::string& arena, uint32_t tp_rank, const ArenaOptions& where) {
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  std::fflush(nullptr);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(ready[0]);
    try {
      RankAttachment worker = RankAttachment::attach(real_os(), arena, tp_rank, 0, {.where = where});
      char byte = 1;
      (void)!write(ready[1], &byte, 1);
      for (;;) pause();
    } catch (const std::exception& error) {
      std::fprintf(stderr, "worker: %s\n", error.what());
    }
    _exit(1);
  }
  close(ready[1]);
  char byte = 0;
  REQUIRE(read(ready[0], &byte, 1) == 1);
  close(ready[0]);
  return pid;
}

void kill_worker(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

uint8_t rank_state(const std::string& arena, uint32_t rank) {
  return inspect_arena(real_os(), arena).ranks.at(rank).status.state;
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

}  // namespace

TEST_CASE("a worker killed while attached is marked dead by the reaper, and its rank taken over") {
  test::TestDaemon d("dead");
  d.start();
  REQUIRE(d.create("kv", 1 << 20, 2)["ok"] == true);
  const std::string arena = d.arena("kv");
  pid_t worker = start_worker(arena, 1, d.where());
  CHECK(rank_state(arena, 1) == static_cast<uint8_t>(RankState::kAttached));
  kill_worker(worker);
  // The state is written first, then the log line and the count: wait for the last of them.
  const std::string marked = cat("arena '", arena, "' rank 1: worker pid ", worker, " is gone: marked dead");
  CHECK(test::TestDaemon::wait_until([&] {
    return rank_state(arena, 1) == static_cast<uint8_t>(RankState::kDead) && d.log().find(marked) != std::string::npos &&
           d.ask("status")["reaper"]["ranks_marked_dead"] == 1;
  }));
  CHECK(rank_state(arena, 1) == static_cast<uint8_t>(RankState::kDead));
  CHECK(d.log().find(marked) != std::string::npos);
  CHECK(d.ask("status")["reaper"]["ranks_marked_dead"] == 1);
  CHECK(rank_state(arena, 0) == static_cast<uint8_t>(RankState::kCreated));  // the other rank is untouched

  // The next worker takes the rank over.
  pid_t next = start_worker(arena, 1, d.where());
  ArenaSnapshot snapshot = inspect_arena(real_os(), arena);
  CHECK(snapshot.ranks[1].status.alive);
  CHECK(snapshot.ranks[1].status.takeovers == 1);
  kill_worker(next);
  CHECK(d.stop() == 0);
}

TEST_CASE("an arena without owner past the retention is destroyed; one with a live worker is kept") {
  test::TestDaemon d("retention");
  d.set("HUGEPIN_RETENTION", "300ms");
  d.start();
  // "claiming" stands for a worker caught in the middle of its claim: this test holds the arena's
  // claim lock (ipc/arena_lock.h), so no pass may destroy it, past its retention or not.
  REQUIRE(d.create("claiming")["ok"] == true);
  const std::string claiming = d.arena("claiming");
  std::optional<ControlSegment> claiming_segment{ControlSegment::open(real_os(), claiming, SegmentAccess::kReadOnly)};
  std::optional<ArenaClaimLock> claim{ArenaClaimLock::take(real_os(), *claiming_segment, claiming)};
  REQUIRE(d.create("owned")["ok"] == true);
  const std::string owned = d.arena("owned");
  pid_t worker = start_worker(owned, 0, d.where());
  // "mapped" stands for an arena a process uses through the shim: its region file is locked
  // (after the worker's fork, which would otherwise hold the lock too).
  REQUIRE(d.create("mapped")["ok"] == true);
  const std::string mapped = d.arena("mapped");
  const int region_fd = open(inspect_arena(real_os(), mapped).ranks.at(0).backing_path.c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(region_fd >= 0);
  REQUIRE(lock_file_for_use(real_os(), region_fd) == 0);  // as the shim holds what it maps
  // The orphan is created after the owned arena got its worker: when the orphan expires, the owned
  // arena is older than the retention too, but it had a live worker all along and must remain.
  REQUIRE(d.create("orphan")["ok"] == true);
  const std::string orphan = d.arena("orphan");
  // The reaper removes the segment, then the region files, then logs: wait for all three, since a
  // test that looks right after the first can see the others still under way.
  const std::string expired_line = cat("arena '", orphan, "' had no live worker, scheduler, creator or locked region for ");
  CHECK(test::TestDaemon::wait_until([&] {
    return !exists(control_segment_path(orphan)) && !exists(arena_data_dir(d.dir(), orphan)) &&
           d.log().find(expired_line) != std::string::npos;
  }));
  CHECK_FALSE(exists(control_segment_path(orphan)));
  CHECK_FALSE(exists(arena_data_dir(d.dir(), orphan)));
  CHECK(exists(control_segment_path(owned)));
  CHECK(d.log().find(expired_line) != std::string::npos);
  CHECK(test::TestDaemon::wait_until([&] { return d.ask("status")["reaper"]["arenas_expired"] == 1; }));
  // Older than the orphan and reaped in name order before it, "claiming" was past its retention
  // in the pass that destroyed the orphan: its lock kept it.
  CHECK(exists(control_segment_path(claiming)));
  CHECK(exists(arena_data_dir(d.dir(), claiming)));
  claim.reset();
  claiming_segment.reset();
  CHECK(test::TestDaemon::wait_until([&] { return !exists(control_segment_path(claiming)); }));
  CHECK(exists(control_segment_path(mapped)));  // older than the orphan too, but its region is locked
  close(region_fd);
  CHECK(test::TestDaemon::wait_until([&] { return !exists(control_segment_path(mapped)); }));

  // Its worker gone, the owned arena expires too.
  kill_worker(worker);
  CHECK(test::TestDaemon::wait_until([&] { return !exists(control_segment_path(owned)); }));
  CHECK(d.stop() == 0);
}

TEST_CASE("stale files are listed by the daemon and by hugepin arena list --stale, and removed only when configured") {
  test::TestDaemon d("stale");
  const std::string data_only = d.arena("data-only");
  const std::string segment_only = d.arena("segment-only");
  ArenaOptions where = d.where();
  create_arena_with_control(real_os(), data_only, layout_for_size(1 << 20, 2, 65536), where);
  REQUIRE(remove_control_segment(real_os(), data_only));
  create_arena_with_control(real_os(), segment_only, layout_for_size(1 << 20, 1, 65536), where);
  destroy_arena(real_os(), segment_only, where);  // the data only
  d.start();

  // Listed, not removed: wait for a few reaper passes to be sure it had the chance.
  const uint64_t passes = d.ask("status")["reaper"]["passes"].get<uint64_t>();
  CHECK(test::TestDaemon::wait_until([&] { return d.ask("status")["reaper"]["passes"].get<uint64_t>() >= passes + 3; }));
  Json list = d.ask("list");
  REQUIRE(list["stale"].size() == 2);
  CHECK(list["stale"][0]["arena"] == data_only);
  CHECK(list["stale"][0]["kind"] == "data-without-segment");
  CHECK(list["stale"][0]["region_files"] == 2);
  CHECK(list["stale"][1]["arena"] == segment_only);
  CHECK(list["stale"][1]["kind"] == "segment-without-data");
  CHECK(exists(arena_data_dir(d.dir(), data_only)));
  CHECK(exists(control_segment_path(segment_only)));

  test::CommandResult cli = test::run_hugepin(cat("arena list --stale --json --shm-dir ", d.dir()));
  REQUIRE(cli.status == 0);
  nlohmann::json stale = nlohmann::json::parse(cli.out)["stale"];
  int mine = 0;
  for (const nlohmann::json& row : stale) {
    if (row["arena"] == data_only || row["arena"] == segment_only) ++mine;
  }
  CHECK(mine == 2);
  test::CommandResult table = test::run_hugepin(cat("arena list --stale --shm-dir ", d.dir()));
  CHECK(table.out.find(data_only) != std::string::npos);

  // Configured to remove them: a reload, and they go.
  d.write_config("remove_stale = yes\n");
  kill(d.pid(), SIGHUP);
  const std::string removed = cat("removed stale arena '", data_only, "' (data-without-segment, 2 region files");
  CHECK(test::TestDaemon::wait_until([&] {
    return !exists(arena_data_dir(d.dir(), data_only)) && !exists(control_segment_path(segment_only)) &&
           d.log().find(removed) != std::string::npos && d.ask("status")["reaper"]["stale_removed"] == 2;
  }));
  CHECK_FALSE(exists(arena_data_dir(d.dir(), data_only)));
  CHECK_FALSE(exists(control_segment_path(segment_only)));
  CHECK(d.log().find(removed) != std::string::npos);
  CHECK(d.ask("status")["reaper"]["stale_removed"] == 2);
  CHECK(d.stop() == 0);
}

}  // namespace hugepin
