// The hugepin command as users run it: exit statuses, one-line errors, JSON that parses.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <cstdio>
#include <string>

#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using hugepin::test::run_hugepin;
using Run = hugepin::test::CommandResult;

std::string tree(const std::string& name) { return hugepin::test::test_data_path("sysfs/" + name); }

}  // namespace

TEST_CASE("--help exits 0 and lists the commands") {
  Run run = run_hugepin("--help");
  CHECK(run.status == 0);
  for (const char* command : {"pool", "arena", "demo", "bench", "shim"}) CHECK(run.out.find(command) != std::string::npos);
  CHECK(run_hugepin("pool set --help").status == 0);
}

TEST_CASE("bad usage exits 2 with one line naming the value") {
  Run run = run_hugepin("pool set 12Q");
  CHECK(run.status == 2);
  CHECK(run.out.find("'12Q' is not a size") != std::string::npos);
  CHECK(std::count(run.out.begin(), run.out.end(), '\n') == 1);
  CHECK(run_hugepin("pool set 1G --pagesize 3M").status == 2);
  CHECK(run_hugepin("arena create x --size 1G").status == 2);  // --ranks missing
  CHECK(run_hugepin("no-such-command").status == 2);
  CHECK(run_hugepin("").status == 2);
}

TEST_CASE("pool show reads a recorded tree as a table and as JSON") {
  Run table = run_hugepin("--sysroot " + tree("two-node") + " pool show");
  CHECK(table.status == 0);
  CHECK(table.out.find("/dev/hugepages1G  1G") != std::string::npos);
  CHECK(table.out.find("enabled=madvise") != std::string::npos);

  Run json = run_hugepin("--sysroot " + tree("two-node") + " pool show --json");
  REQUIRE(json.status == 0);
  auto parsed = nlohmann::json::parse(json.out);
  CHECK(parsed["nodes"] == nlohmann::json::array({0, 1}));
  CHECK(parsed["per_node"][0]["free"] == 1000);
  CHECK(parsed["system"][0]["reserved"] == 10);
  CHECK(parsed["mounts"][1]["page_size"] == 1073741824);
}

TEST_CASE("a runtime failure exits 1 with one line") {
  Run run = run_hugepin("--sysroot " + tree("malformed") + " pool show");
  CHECK(run.status == 1);
  CHECK(run.out.find("hugepin: error: malformed kernel file") == 0);
  CHECK(run_hugepin("arena destroy no-such-arena-here").status == 1);
}

TEST_CASE("pool set on a copied tree writes the nodes and reports the shortfall-free result") {
  hugepin::test::TempDir dir;
  hugepin::test::copy_test_tree("sysfs/two-node", dir.path() + "/root");
  Run run = run_hugepin("--sysroot " + dir.path() + "/root pool set 3G --pagesize 2M");
  CHECK(run.status == 0);
  std::string written;
  FILE* file = std::fopen((dir.path() + "/root/sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages").c_str(), "r");
  REQUIRE(file != nullptr);
  char text[32] = {};
  CHECK(std::fgets(text, sizeof text, file) != nullptr);
  std::fclose(file);
  CHECK(std::string(text) == "768");
}

TEST_CASE("bench fence runs both schedulers on the same stream and prints JSON") {
  Run run = run_hugepin("bench fence --ranks 2,16 --reports 20000 --repeat 1 --warmup 0 --json");
  REQUIRE(run.status == 0);
  auto parsed = nlohmann::json::parse(run.out);
  CHECK(parsed["benchmark"] == "fence");
  REQUIRE(parsed["rows"].size() == 2);
  CHECK(parsed["rows"][1]["ranks"] == 16);
  CHECK(parsed["rows"][0]["ours_reports_per_second"]["median"].get<double>() > 0);
  CHECK(parsed["rows"][0]["baseline_reports_per_second"]["median"].get<double>() > 0);
  CHECK(parsed["rows"][0]["reports"].get<uint64_t>() >= 20000);
  CHECK(run_hugepin("bench fence --ranks 0").status == 2);
  CHECK(run_hugepin("bench fence --ranks 2000").status == 2);
  CHECK(run_hugepin("bench fence --jobs 1024 --chunks-per-job 64").status == 2);
}

TEST_CASE("shim env lists every HUGEPIN_ option with its default, its value here and its meaning") {
  Run table = hugepin::test::run_command("env -u HUGEPIN_ARENA HUGEPIN_MIN_BYTES=128M " + std::string(HUGEPIN_CLI_PATH) +
                                         " shim env");
  CHECK(table.status == 0);
  CHECK(table.out.find("VARIABLE") == 0);
  CHECK(table.out.find("HUGEPIN_MIN_BYTES      64M       128M") != std::string::npos);
  CHECK(table.out.find("HUGEPIN_DISABLE") != std::string::npos);

  Run json = hugepin::test::run_command("{ HUGEPIN_LOG=loud " + std::string(HUGEPIN_CLI_PATH) + " shim env --json 2>/dev/null; }");
  REQUIRE(json.status == 0);
  auto parsed = nlohmann::json::parse(json.out);
  REQUIRE(parsed["options"].size() >= 9);
  bool found = false;
  for (const auto& option : parsed["options"]) {
    CHECK(option["variable"].get<std::string>().rfind("HUGEPIN_", 0) == 0);
    CHECK_FALSE(option["doc"].get<std::string>().empty());
    if (option["variable"] == "HUGEPIN_LOG") {
      found = true;
      CHECK(option["value"] == "loud");
      CHECK(option["valid"] == false);
      CHECK(option["effective"] == "warn");
      CHECK(option["choices"] == "quiet|warn|info");
    }
  }
  CHECK(found);
  // A bad value is reported in one line naming the variable and the value.
  Run warned = hugepin::test::run_command("{ HUGEPIN_LOG=loud " + std::string(HUGEPIN_CLI_PATH) + " shim env >/dev/null; }");
  CHECK(warned.out == "hugepin: warning: HUGEPIN_LOG='loud' is not one of quiet|warn|info: using the default warn\n");
}

TEST_CASE("shim list with no shim processes says so") {
  hugepin::test::TempDir dir;
  Run run = hugepin::test::run_command("HUGEPIN_SHM_DIR=" + dir.path() + " " + std::string(HUGEPIN_CLI_PATH) + " shim list");
  CHECK(run.status == 0);
  CHECK(run.out == "no processes run the shim (no tables in " + dir.path() + ")\n");
  Run json = hugepin::test::run_command("HUGEPIN_SHM_DIR=" + dir.path() + " " + std::string(HUGEPIN_CLI_PATH) +
                                        " shim list --json");
  CHECK(nlohmann::json::parse(json.out)["processes"].empty());
}
