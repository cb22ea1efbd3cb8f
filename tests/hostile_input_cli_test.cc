// The hugepin command against what another local user plants and against values that parse but
// cannot be right (issue 20, items 2, 7 and 8). Planted files belong to uid 65534 (nobody). Every
// command runs under timeout(1): one that blocks on a FIFO fails the test (status 124) instead of
// hanging it.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/error.h"
#include "base/size.h"
#include "hugemem/naming.h"
#include "ipc/arena_control.h"
#include "ipc/test_arena.h"
#include "tests/support/child_process.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace hugepin {
namespace {

using Run = test::CommandResult;

Run hugepin_within_a_minute(const std::string& args) {
  return test::run_command(cat("timeout 60 ", HUGEPIN_CLI_PATH, " ", args, " 2>&1"));
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A shm directory as systemd-tmpfiles used to make /dev/shm/hugepin: anyone may plant in it.
struct OpenShmDir {
  test::TempDir dir{"/dev/shm"};
  OpenShmDir() {
    REQUIRE(chmod(dir.path().c_str(), 0755) == 0);
    REQUIRE(mkdir((dir.path() + "/hugepin").c_str(), 0755) == 0);
    REQUIRE(chmod((dir.path() + "/hugepin").c_str(), 01777) == 0);
  }
  const std::string& path() const { return dir.path(); }
};

}  // namespace

TEST_CASE("a FIFO planted as a control segment or a region blocks no command: each says what it refused") {
  OpenShmDir shm;
  const std::string name = cat("t", getpid(), "-fifo");
  const std::string segment = control_segment_path(name);
  const std::string region = cat(shm.path(), "/hugepin/", name, "/rank-0");
  REQUIRE(test::run_as_nobody([&] {
            return mkfifo(segment.c_str(), 0666) == 0 && mkdir((shm.path() + "/hugepin/" + name).c_str(), 0755) == 0 &&
                   mkfifo(region.c_str(), 0666) == 0;
          }) == 0);

  Run list = hugepin_within_a_minute("arena list --shm-dir " + shm.path());
  CHECK(list.status == 0);
  CHECK(contains(list.out, cat("refusing control segment ", segment, ": it is a FIFO, not a regular file")));
  CHECK(contains(list.out, cat("refusing region file ", region, ": it is a FIFO, not a regular file")));
  Run json = hugepin_within_a_minute("arena list --json --shm-dir " + shm.path() + " 2>/dev/null");
  CHECK(json.status == 0);
  CHECK(hugepin_within_a_minute("arena list --stale --shm-dir " + shm.path()).status == 0);
  CHECK(hugepin_within_a_minute("inspect").status == 0);
  CHECK(hugepin_within_a_minute("metrics").status == 0);
  Run one = hugepin_within_a_minute("inspect " + name);
  CHECK(one.status == 1);
  CHECK(contains(one.out, cat("refusing control segment ", segment, ": it is a FIFO")));
  // The data directory a create looks through for a name already taken holds the FIFO too.
  const std::string created = cat("t", getpid(), "-beside-fifo");
  Run create =
      hugepin_within_a_minute(cat("arena create ", created, " --size 1M --ranks 1 --chunk 64K --pagesize 4K --dir ", shm.path()));
  CHECK(create.status == 0);
  CHECK(hugepin_within_a_minute("arena destroy " + created).status == 0);
  unlink(segment.c_str());
}

TEST_CASE("a configuration of /dev/zero or a FIFO is refused at once, not read or waited on") {
  test::TempDir dir;
  const std::string fifo = dir.path() + "/hugepind.conf";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  for (const std::string& config : {std::string("/dev/zero"), fifo}) {
    Run apply = hugepin_within_a_minute("pool apply --config " + config);
    CHECK(apply.status == 2);
    CHECK(contains(apply.out, cat("refusing configuration file ", config, ": it is a ")));
    Run daemon = test::run_command(cat("timeout 60 ", HUGEPIN_DAEMON_PATH, " --config ", config, " --check-config 2>&1"));
    CHECK(daemon.status == 2);
    CHECK(contains(daemon.out, cat("refusing configuration file ", config)));
  }
}

// Issue 20, item 8: values that were accepted and then ignored or obeyed.
TEST_CASE("values that parse but cannot be right are refused, naming them, with exit status 2") {
  struct Case {
    std::string args;
    std::string says;
  };
  const Case cases[] = {
      {"demo --seconds nan", "--seconds: 'nan' is not a finite number"},
      {"demo --kill-rank 0 --kill-after nan", "--kill-after: 'nan' is not a finite number"},
      {"demo --kill-after 1", "--kill-after requires --kill-rank"},
      {"demo --restart", "--restart requires --kill-rank"},
      {"inspect --watch nan", "--watch: 'nan' is not a finite number"},
      {"metrics ../../x", "'../../x' is not an arena name"},
      {"inspect ../x", "'../x' is not an arena name"},
      {"arena list --shm-dir /nonexistent", "/nonexistent"},
      {"bench spill --request 3", "--request 3: not a multiple of 4K of at least 4K"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    Run run = hugepin_within_a_minute(c.args);
    CHECK(run.status == 2);
    CHECK(contains(run.out, c.says));
  }
}

TEST_CASE("pool set larger than the machine is refused before anything is written") {
  test::TempDir dir;
  test::copy_test_tree("sysfs/two-node", dir.path() + "/root");
  const std::string node0 = dir.path() + "/root/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages";
  std::ifstream before_file(node0);
  std::string before((std::istreambuf_iterator<char>(before_file)), std::istreambuf_iterator<char>());
  Run run = hugepin_within_a_minute("--sysroot " + dir.path() + "/root pool set 18446744073709551615");
  CHECK(run.status == 2);
  CHECK(contains(run.out, "SIZE 18446744073709551615 ("));
  CHECK(contains(run.out, "is more than this machine's memory (23.54 GiB in /proc/meminfo)"));
  std::ifstream after_file(node0);
  std::string after((std::istreambuf_iterator<char>(after_file)), std::istreambuf_iterator<char>());
  CHECK(after == before);
}

// Issue 20, item 7: `bench spill` killed by Ctrl-C left 1 GiB in /dev/shm and 1 GiB on disk.
TEST_CASE("bench spill interrupted by SIGINT removes its arena and its file") {
  test::TempDir disk("/var/tmp");
  std::fflush(nullptr);
  const pid_t bench = fork();
  REQUIRE(bench >= 0);
  if (bench == 0) {
    execl(HUGEPIN_CLI_PATH, "hugepin", "bench", "spill", "--dir", disk.path().c_str(), "--size", "64M", "--repeat", "100",
          "--methods", "pool", "--pagesize", "4K", static_cast<char*>(nullptr));
    _exit(127);
  }
  const std::string file = cat(disk.path(), "/hugepin-bench-spill-", bench, ".data");
  const std::string arena_dir = cat("/dev/shm/hugepin/bench-spill-", bench);
  // Interrupted once it is under way: its file exists.
  bool started = false;
  for (int i = 0; i < 60000 && !started; ++i) {
    started = std::filesystem::exists(file);
    if (!started) usleep(1000);
  }
  CHECK(started);
  REQUIRE(kill(bench, SIGINT) == 0);
  int status = 0;
  REQUIRE(waitpid(bench, &status, 0) == bench);
  CHECK(WIFEXITED(status));  // not killed by the signal: it stopped and cleaned up
  CHECK(WEXITSTATUS(status) == 1);
  CHECK_FALSE(std::filesystem::exists(file));
  CHECK_FALSE(std::filesystem::exists(arena_dir));
}

// Issue 20, item 7: an arena orphaned by kill -9 of its creator was not in `arena list --stale`
// while its pages stayed taken.
TEST_CASE("an arena whose creator and scheduler died holding it is listed as orphaned") {
  test::TempDir data("/dev/shm");
  ArenaOptions where;
  where.page_size = 4 * kKiB;
  where.shm_dir = data.path();
  where.prefault_threads = 1;
  const std::string orphan = test::unique_arena_name("orphan");
  const std::string unused = test::unique_arena_name("unused");
  REQUIRE(test::run_in_child([&] {
            // A demo in miniature: creates its arena, takes the scheduler role, and is killed.
            create_arena_with_control(real_os(), orphan, test::small_layout(2, 1), where);
            create_arena_with_control(real_os(), unused, test::small_layout(1, 1), where);  // as `arena create` leaves one
            ArenaControl scheduler = ArenaControl::adopt(real_os(), orphan);
            raise(SIGKILL);
            return false;
          }) == -SIGKILL);
  Run run = hugepin_within_a_minute("arena list --stale --json --shm-dir " + data.path());
  REQUIRE(run.status == 0);
  auto json = nlohmann::json::parse(run.out);
  bool listed = false;
  for (const auto& stale : json["stale"]) {
    CHECK(stale["arena"] != unused);  // made and never used: nobody's orphan
    if (stale["arena"] != orphan) continue;
    listed = true;
    CHECK(stale["kind"] == "orphaned");
    CHECK(stale["region_files"] == 2);
    CHECK(stale["in_use"] == false);
  }
  CHECK(listed);
  for (const std::string& name : {orphan, unused}) destroy_arena_with_control(real_os(), name, where);
}

}  // namespace hugepin
