// The hugepin commands that belong to the daemon: `hugepin daemon status|list|create|destroy`
// against a real hugepind, `hugepin pool apply` on recorded sysfs trees (and a kernel that gives
// fewer pages than asked), `hugepin arena list --stale` as a table.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "base/error.h"
#include "daemon/pool_config.h"
#include "hugemem/pool.h"
#include "ipc/arena_control.h"
#include "ipc/control_segment.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/fault_os.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace hugepin {
namespace {

std::string read_number(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  in >> text;
  return text;
}

std::string node_file(const std::string& root, int node, const std::string& size) {
  return cat(root, "/sys/devices/system/node/node", node, "/hugepages/hugepages-", size, "/nr_hugepages");
}

// A kernel that grants at most `limit` pages whatever is asked, as a fragmented machine does.
class StingyKernel : public test::ForwardingOs {
 public:
  StingyKernel(Os& target, uint64_t limit) : ForwardingOs(target), limit_(limit) {}
  int write_file(const std::string& path, std::string_view contents) override {
    if (path.find("nr_hugepages") == std::string::npos) return target_.write_file(path, contents);
    const uint64_t asked = std::stoull(std::string(contents));
    return target_.write_file(path, std::to_string(std::min(asked, limit_)));
  }

 private:
  uint64_t limit_;
};

}  // namespace

TEST_CASE("hugepin daemon status, create, list and destroy talk to hugepind over --socket") {
  test::TestDaemon d("cli");
  d.start();
  test::CommandResult status = test::run_hugepin(cat("daemon status --socket ", d.socket()));
  REQUIRE(status.status == 0);
  CHECK(status.out.find(cat("pid ", d.pid())) != std::string::npos);
  CHECK(status.out.find("serving: 0 arenas") != std::string::npos);
  test::CommandResult json = test::run_hugepin(cat("daemon status --json --socket ", d.socket()));
  REQUIRE(json.status == 0);
  CHECK(nlohmann::json::parse(json.out)["daemon"]["pid"] == d.pid());

  const std::string name = d.arena("kv");
  test::CommandResult create =
      test::run_command(cat("HUGEPIN_SOCKET=", d.socket(), " ", HUGEPIN_CLI_PATH, " daemon create ", name,
                            " --size 1M --ranks 2 --chunk 64K --pagesize 4K"));
  REQUIRE(create.status == 0);
  CHECK(create.out.find(cat("hugepind created arena '", name, "': 2 regions")) == 0);
  test::CommandResult list = test::run_hugepin(cat("daemon list --socket ", d.socket()));
  REQUIRE(list.status == 0);
  CHECK(list.out.find(name) != std::string::npos);
  CHECK(list.out.find("consistent") != std::string::npos);
  test::CommandResult again =
      test::run_hugepin(cat("daemon create ", name, " --size 1M --ranks 2 --chunk 64K --pagesize 4K --socket ", d.socket()));
  CHECK(again.status == 1);
  CHECK(again.out.find("hugepin: error: hugepind: ") == 0);
  CHECK(again.out.find("already exists") != std::string::npos);
  test::CommandResult destroy = test::run_hugepin(cat("daemon destroy ", name, " --socket ", d.socket()));
  REQUIRE(destroy.status == 0);
  CHECK(destroy.out == cat("hugepind destroyed arena '", name, "' (2 region files, control segment)\n"));
  CHECK(d.stop() == 0);

  test::CommandResult down = test::run_hugepin(cat("daemon status --socket ", d.socket()));
  CHECK(down.status == 1);
  CHECK(down.out.find(cat("cannot connect to hugepind at ", d.socket(), " (is hugepind running?")) != std::string::npos);
}

TEST_CASE("pool apply sets the [pool] section's pages per node; entries from --pool replace the file's") {
  test::TempDir dir;
  const std::string root = dir.path() + "/root";
  test::copy_test_tree("sysfs/two-node", root);
  const std::string config = dir.path() + "/hugepind.conf";
  std::ofstream(config) << "[daemon]\nretention = 1h\n[pool]\n2M.node0 = 100\n2M.node1 = 200\n1G = 2\n";
  test::CommandResult run = test::run_hugepin(cat("--sysroot ", root, " pool apply --config ", config));
  CHECK(run.status == 0);
  CHECK(read_number(node_file(root, 0, "2048kB")) == "100");
  CHECK(read_number(node_file(root, 1, "2048kB")) == "200");
  CHECK(read_number(node_file(root, 0, "1048576kB")) == "1");
  CHECK(read_number(node_file(root, 1, "1048576kB")) == "1");

  run = test::run_command(cat("HUGEPIN_POOL=2M=10 ", HUGEPIN_CLI_PATH, " --sysroot ", root, " pool apply --config ", config));
  CHECK(run.status == 0);
  CHECK(read_number(node_file(root, 0, "2048kB")) == "5");
  CHECK(read_number(node_file(root, 0, "1048576kB")) == "1");  // the file's entries did not apply
  run = test::run_hugepin(cat("--sysroot ", root, " pool apply --config ", config, " --pool 2M.node1=7"));
  CHECK(run.status == 0);
  CHECK(read_number(node_file(root, 1, "2048kB")) == "7");
}

TEST_CASE("pool apply: nothing to do without entries, exit 2 for a bad line, exit 1 for a node the kernel lacks") {
  test::TempDir dir;
  const std::string root = dir.path() + "/root";
  test::copy_test_tree("sysfs/two-node", root);
  const std::string config = dir.path() + "/hugepind.conf";
  std::ofstream(config) << "[daemon]\nretention = 1h\n";
  test::CommandResult run = test::run_hugepin(cat("--sysroot ", root, " pool apply --config ", config));
  CHECK(run.status == 0);
  CHECK(run.out.find("no pool entries") == 0);

  std::ofstream(config) << "[pool]\n2M.node0 = lots\n";
  run = test::run_hugepin(cat("--sysroot ", root, " pool apply --config ", config));
  CHECK(run.status == 2);
  CHECK(run.out.find(cat("hugepin: error: ", config, ":2: pool entry '2M.node0': 'lots' is not a whole number")) == 0);

  std::ofstream(config) << "[pool]\n2M.node5 = 1\n";
  run = test::run_hugepin(cat("--sysroot ", root, " pool apply --config ", config));
  CHECK(run.status == 1);
  CHECK(run.out.find("NUMA node 5 does not exist") != std::string::npos);
  run = test::run_hugepin(cat("--sysroot ", root, " pool apply --config /nonexistent/hugepind.conf"));
  CHECK(run.status == 2);
}

TEST_CASE("a kernel that gives fewer pages than asked: every change reported, the shortfall named") {
  test::TempDir dir;
  const std::string root = dir.path() + "/root";
  test::copy_test_tree("sysfs/two-node", root);
  std::unique_ptr<Os> rooted = make_rooted_os(root);
  StingyKernel kernel(*rooted, 50);
  std::vector<PoolChange> changes = daemon::apply_pool_entries(kernel, daemon::parse_pool_list("2M.node0=100,2M.node1=20"));
  REQUIRE(changes.size() == 2);
  CHECK(changes[0].asked == 100);
  CHECK(changes[0].after == 50);
  CHECK(changes[0].short_of_target());
  CHECK_FALSE(changes[1].short_of_target());
  const std::string shortfall = shortfall_message(changes);
  CHECK(shortfall.find("node 0") != std::string::npos);
}

TEST_CASE("arena list --stale as a table, and 'no stale files' when there are none") {
  test::TestDaemon d("stale-cli");  // only for its directory and prefix
  test::CommandResult none = test::run_hugepin(cat("arena list --stale --shm-dir ", d.dir(), " --json"));
  REQUIRE(none.status == 0);
  for (const nlohmann::json& row : nlohmann::json::parse(none.out)["stale"]) CHECK(row["arena"] != d.arena("x"));
  ArenaOptions where = d.where();
  create_arena_with_control(real_os(), d.arena("x"), layout_for_size(1 << 20, 1, 65536), where);
  REQUIRE(remove_control_segment(real_os(), d.arena("x")));
  test::CommandResult table = test::run_hugepin(cat("arena list --stale --shm-dir ", d.dir()));
  REQUIRE(table.status == 0);
  CHECK(table.out.find("ARENA") == 0);
  CHECK(table.out.find(d.arena("x")) != std::string::npos);
  CHECK(table.out.find("data-without-segment") != std::string::npos);
  destroy_arena(real_os(), d.arena("x"), where);
}

}  // namespace hugepin
