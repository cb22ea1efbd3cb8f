// hugepind's life: adoption after kill -9 with a worker's data intact, quarantine of an
// inconsistent leftover at start, teardown or not at SIGTERM, reload on SIGHUP, one daemon per
// socket, a bad configuration refused by file and line.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/error.h"
#include "base/pattern.h"
#include "daemon/protocol.h"
#include "daemon/quarantine.h"
#include "hugemem/naming.h"
#include "ipc/arena_control.h"
#include "ipc/inspect.h"
#include "ipc/rank_attachment.h"
#include "ipc/test_arena.h"
#include "tests/support/child_process.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/run_command.h"

namespace hugepin {
namespace {

using daemon::Json;

constexpr uint64_t kSeed = 0xfeedULL;

// Writes the pattern into rank `rank`'s region from a worker process that then detaches.
void write_from_worker(const std::string& arena, uint32_t rank, const ArenaOptions& where) {
  REQUIRE(test::run_in_child([&] {
            RankAttachment worker = RankAttachment::attach(real_os(), arena, rank, 0, {.where = where});
            fill_pattern(worker.region().data(), worker.region().size(), kSeed + rank);
            worker.detach();
            return true;
          }) == 0);
}

// Checks the pattern from another worker process (a reader maps the region as the engine would).
bool data_intact(const std::string& arena, uint32_t rank, const ArenaOptions& where) {
  return test::run_in_child([&] {
           RankAttachment worker = RankAttachment::attach(real_os(), arena, rank, 0, {.where = where});
           bool intact = !find_pattern_mismatch(worker.region().data(), worker.region().size(), kSeed + rank);
           worker.detach();
           return intact;
         }) == 0;
}

Json find_arena(const Json& list, const std::string& name) {
  for (const Json& arena : list["arenas"]) {
    if (arena["name"] == name) return arena;
  }
  return Json();
}

}  // namespace

TEST_CASE("adoption after kill -9: a worker's data survives, the generation goes up, the new daemon serves it") {
  test::TestDaemon d("adopt");
  d.start();
  REQUIRE(d.create("kv", 1 << 20, 2)["ok"] == true);
  const std::string arena = d.arena("kv");
  write_from_worker(arena, 0, d.where());
  write_from_worker(arena, 1, d.where());
  const uint64_t generation = inspect_arena(real_os(), arena).generation;

  CHECK(d.stop(SIGKILL) == -SIGKILL);
  CHECK(access(d.socket().c_str(), F_OK) == 0);  // a dead daemon leaves its socket behind
  d.start();                                     // and the next one replaces it
  CHECK(inspect_arena(real_os(), arena).generation == generation + 1);
  CHECK(d.log().find(cat("adopted arena '", arena, "': generation ", generation + 1)) != std::string::npos);
  CHECK(data_intact(arena, 0, d.where()));
  CHECK(data_intact(arena, 1, d.where()));

  Json status = d.ask("status");
  CHECK(status["arenas"]["adopted_at_start"] == 1);
  Json listed = find_arena(d.ask("list"), arena);
  REQUIRE(listed.is_object());
  CHECK(listed["health"] == "consistent");
  CHECK(listed["generation"] == generation + 1);

  // A clean restart adopts it again: each start is a new owner.
  CHECK(d.stop() == 0);
  d.start();
  CHECK(inspect_arena(real_os(), arena).generation == generation + 2);
  CHECK(data_intact(arena, 0, d.where()));
  CHECK(d.stop() == 0);
}

TEST_CASE("an inconsistent leftover is quarantined at start with its data kept; a consistent arena beside it is adopted") {
  test::TestDaemon d("quarantine");
  const std::string broken = d.arena("broken");
  const std::string fine = d.arena("fine");
  ArenaOptions where = d.where();
  create_arena_with_control(real_os(), broken, layout_for_size(1 << 20, 2, 65536), where);
  create_arena_with_control(real_os(), fine, layout_for_size(1 << 20, 2, 65536), where);
  write_from_worker(broken, 0, where);
  const std::string rank1 = cat(arena_data_dir(d.dir(), broken), "/rank-1");
  REQUIRE(truncate(rank1.c_str(), 4096) == 0);

  d.start();
  CHECK(access(control_segment_path(broken).c_str(), F_OK) != 0);
  CHECK(access(control_segment_path(fine).c_str(), F_OK) == 0);
  std::vector<daemon::QuarantineEntry> entries = daemon::list_quarantine(real_os(), broken);
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].reason.find(cat("rank 1's region file ", rank1, " is 4096 bytes")) == 0);
  CHECK(d.log().find(cat("quarantined arena '", broken, "' into ", entries[0].path)) != std::string::npos);
  CHECK(d.log().find(cat("adopted arena '", fine, "'")) != std::string::npos);

  // Reported by the daemon, never deleted: rank 0's data is where quarantine put it.
  Json list = d.ask("list");
  REQUIRE(list["quarantined"].size() == 1);
  CHECK(list["quarantined"][0]["arena"] == broken);
  CHECK_FALSE(find_arena(list, broken).is_object());
  CHECK(d.ask("status")["quarantined"] == 1);
  const std::string moved = cat(d.dir(), "/hugepin/.quarantine/", entries[0].name, "/rank-0");
  MappedRegion region = MappedRegion::open(real_os(), moved, false);
  CHECK_FALSE(find_pattern_mismatch(region.data(), region.size(), kSeed).has_value());
  CHECK(d.stop() == 0);
  CHECK(access(moved.c_str(), F_OK) == 0);
}

TEST_CASE("SIGTERM keeps arenas by default; with teardown_on_stop it destroys them") {
  test::TestDaemon d("teardown");
  d.start();
  REQUIRE(d.create("kept")["ok"] == true);
  CHECK(d.stop() == 0);
  CHECK(access(control_segment_path(d.arena("kept")).c_str(), F_OK) == 0);

  d.write_config("[daemon]\nteardown_on_stop = yes\n");
  d.start();
  REQUIRE(d.create("gone")["ok"] == true);
  CHECK(d.stop() == 0);
  CHECK(access(control_segment_path(d.arena("kept")).c_str(), F_OK) != 0);
  CHECK(access(control_segment_path(d.arena("gone")).c_str(), F_OK) != 0);
  CHECK(access(arena_data_dir(d.dir(), d.arena("gone")).c_str(), F_OK) != 0);
  CHECK(d.log().find(cat("teardown: destroyed arena '", d.arena("gone"), "'")) != std::string::npos);
}

TEST_CASE("SIGHUP reloads the file; a bad file is refused and the running configuration kept") {
  test::TestDaemon d("reload");
  d.write_config("# first\nretention = 0\n");
  d.start();
  CHECK(d.ask("status")["settings"]["retention"] == "0");
  d.write_config("retention = 36h\nremove_stale = on\n");
  const size_t ready = d.notify().count("READY=1");
  kill(d.pid(), SIGHUP);
  CHECK(test::TestDaemon::wait_until([&] {
    d.notify().receive(50);
    return d.notify().count("READY=1") > ready;
  }));
  CHECK(d.notify().count("RELOADING=1") == 1);
  Json settings = d.ask("status")["settings"];
  CHECK(settings["retention"] == "36h");
  CHECK(settings["remove_stale"] == true);
  CHECK(d.log().find(cat("reload: option retention = 36h (", d.config_path(), ":1)")) != std::string::npos);

  d.write_config("retention = forever\n");
  kill(d.pid(), SIGHUP);
  CHECK(test::TestDaemon::wait_until([&] {
    d.notify().receive(50);
    return d.notify().count("READY=1") > ready + 1;
  }));
  CHECK(d.ask("status")["settings"]["retention"] == "36h");
  CHECK(d.log().find(cat("reload failed, keeping the running configuration: ", d.config_path(),
                         ":1: retention = 'forever' is not a duration")) != std::string::npos);
  CHECK(d.stop() == 0);
}

TEST_CASE("one hugepind per socket; a bad configuration stops the start, named by file and line") {
  test::TestDaemon d("single");
  d.start();
  test::TestDaemon second("single-2");
  second.set("HUGEPIN_SOCKET", d.socket());
  second.spawn();
  CHECK(second.wait() == 1);
  CHECK(second.log().find(cat("another hugepind (pid ", d.pid(), ") serves ", d.socket())) != std::string::npos);
  CHECK(d.ask("status")["ok"] == true);  // the first one is untouched
  CHECK(d.stop() == 0);

  d.write_config("[daemon]\nretention = 1h\nretension = 2h\n");
  d.spawn();
  CHECK(d.wait() == 2);
  CHECK(d.log().find(cat("hugepind: error: ", d.config_path(), ":3: unknown key 'retension'")) != std::string::npos);
  CHECK(d.notify().wait_for("STATUS=bad configuration: ", 30000));

  test::CommandResult check = test::run_command(cat("HUGEPIN_CONFIG=", d.config_path(), " ", HUGEPIN_DAEMON_PATH,
                                                    " --check-config"));
  CHECK(check.status == 2);
  CHECK(check.out.find(":3: unknown key 'retension'") != std::string::npos);
  d.write_config("[daemon]\nretention = 1h\n");
  check = test::run_command(cat("HUGEPIN_CONFIG=", d.config_path(), " HUGEPIN_RETENTION=2h ", HUGEPIN_DAEMON_PATH,
                                " --check-config --retention 3h"));
  CHECK(check.status == 0);
  CHECK(check.out.find("retention = 3h (flag --retention)") != std::string::npos);
}

// Issue 20, item 2: a FIFO among the segments made a running hugepind stop answering (and
// ignore SIGTERM), and a fresh one never reach READY. Planted by uid 65534.
TEST_CASE("a FIFO planted as a segment or a region: hugepind starts, answers, writes metrics and stops") {
  test::TestDaemon d("fifo");
  const std::string top = d.dir() + "/" + std::string(kDataDirName);
  REQUIRE(mkdir(top.c_str(), 0755) == 0);
  REQUIRE(chmod(top.c_str(), 01777) == 0);  // as systemd-tmpfiles once made it
  const std::string segment = control_segment_path(d.arena("fifo"));
  const std::string data = top + "/" + d.arena("data");
  REQUIRE(test::run_as_nobody([&] {
            return mkfifo(segment.c_str(), 0666) == 0 && mkdir(data.c_str(), 0755) == 0 &&
                   mkfifo((data + "/rank-0").c_str(), 0666) == 0;
          }) == 0);
  d.start();  // READY=1, or the test fails with the daemon's log
  CHECK(d.ask("status")["ok"] == true);
  CHECK(d.ask("list")["ok"] == true);
  CHECK(test::TestDaemon::wait_until([&] { return std::filesystem::exists(d.dir() + "/hugepin.prom"); }));
  CHECK(d.stop() == 0);
  unlink(segment.c_str());
}

}  // namespace hugepin
