// The hugepin command as users run it: exit statuses, one-line errors, JSON that parses.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

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
  for (const char* command : {"pool", "arena", "demo", "bench", "shim", "inspect", "metrics"}) {
    CHECK(run.out.find(command) != std::string::npos);
  }
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

  // A node or page size the machine lacks is bad usage, and nothing is written.
  Run no_node = run_hugepin("--sysroot " + dir.path() + "/root pool set 1G --node 7");
  CHECK(no_node.status == 2);
  CHECK(no_node.out.find("--node 7: no such NUMA node here (nodes: 2)") != std::string::npos);
  CHECK(run_hugepin("--sysroot " + dir.path() + "/root pool clear --pagesize 4K").status == 2);
  file = std::fopen((dir.path() + "/root/sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages").c_str(), "r");
  REQUIRE(file != nullptr);
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

TEST_CASE("arena create --chunk, list, inspect, metrics and destroy, with the control segment") {
  const std::string name = "cli-test-" + std::to_string(getpid());
  struct Cleanup {
    std::string name;
    ~Cleanup() { run_hugepin("arena destroy " + name); }
  } cleanup{name};
  Run create = run_hugepin("arena create " + name + " --size 8M --ranks 2 --chunk 1M --pagesize 4K --json");
  REQUIRE(create.status == 0);
  auto created = nlohmann::json::parse(create.out);
  CHECK(created["control"]["path"] == "/dev/shm/hugepin." + name);
  CHECK(created["control"]["chunk_count"] == 4);
  CHECK(created["control"]["tp"] == 2);

  auto listed = nlohmann::json::parse(run_hugepin("arena list --json").out);
  bool found = false;
  for (const auto& arena : listed["arenas"]) {
    if (arena["name"] != name) continue;
    found = true;
    CHECK(arena["control"]["mode"] == 0600);
    CHECK(arena["regions"].size() == 2);
  }
  CHECK(found);

  Run inspect = run_hugepin("inspect " + name + " --json");
  REQUIRE(inspect.status == 0);
  auto arena = nlohmann::json::parse(inspect.out)["arenas"][0];
  CHECK(arena["tp"] == 2);
  CHECK(arena["chunk_count"] == 4);
  CHECK(arena["ranks"][1]["state"] == "created");
  CHECK(arena["ranks"][1]["ring"]["reports_per_second"].is_null());  // one sample: no rate
  // The scheduler's keys, in this order (scripts read them; protocol/scheduler_figures.h makes them).
  const auto ordered = nlohmann::ordered_json::parse(inspect.out);
  std::vector<std::string> keys;
  for (const auto& item : ordered["arenas"][0]["scheduler"].items()) keys.push_back(item.key());
  CHECK(keys == std::vector<std::string>{"pid", "alive", "consistent", "pinned_chunks", "jobs_waiting_quorum",
                                         "retired_chunks_waiting_fence", "dead_ranks", "jobs_completed", "jobs_failed",
                                         "reports_applied", "reports_rejected"});

  Run table = run_hugepin("inspect " + name);
  CHECK(table.status == 0);
  CHECK(table.out.find("arena " + name + ": tp 2 x pp 1, 4 chunks of 1 block") == 0);
  CHECK(table.out.find("\n  pinned chunks 0, jobs waiting for quorum 0, retired chunks waiting on the fence 0, dead ranks "
                       "0, jobs completed 0, failed 0, reports applied 0, rejected 0\n") != std::string::npos);

  Run watch = run_hugepin("inspect " + name + " --json --watch 0.05 --count 3");
  REQUIRE(watch.status == 0);
  std::istringstream lines(watch.out);
  std::string line;
  int samples = 0;
  while (std::getline(lines, line)) {
    auto sample = nlohmann::json::parse(line);
    CHECK(sample["arenas"][0]["ranks"][0]["ring"]["reports_per_second"].is_null() == (samples == 0));
    ++samples;
  }
  CHECK(samples == 3);

  Run metrics = run_hugepin("metrics " + name);
  CHECK(metrics.status == 0);
  CHECK(metrics.out.find("# TYPE hugepin_ring_reports_posted_total counter") != std::string::npos);
  CHECK(metrics.out.find("hugepin_arena_up{arena=\"" + name + "\"} 1") != std::string::npos);

  Run destroy = run_hugepin("arena destroy " + name);
  CHECK(destroy.status == 0);
  CHECK(destroy.out.find("2 region files, control segment") != std::string::npos);
  CHECK(run_hugepin("inspect " + name).status == 1);
}

TEST_CASE("inspect, metrics and arena create refuse what is wrong with one line") {
  Run missing = run_hugepin("inspect no-such-arena-here");
  CHECK(missing.status == 1);
  CHECK(missing.out.find("arena 'no-such-arena-here' has no control segment") != std::string::npos);
  CHECK(std::count(missing.out.begin(), missing.out.end(), '\n') == 1);
  CHECK(run_hugepin("metrics no-such-arena-here").status == 1);
  CHECK(run_hugepin("inspect --watch 0").status == 2);
  Run small = run_hugepin("arena create tiny-" + std::to_string(getpid()) + " --size 1M --ranks 1 --chunk 2M --pagesize 4K");
  CHECK(small.status == 2);  // options that do not fit together: bad usage
  CHECK(small.out.find("less than one --chunk of 2.00 MiB") != std::string::npos);
  CHECK(run_hugepin("arena create x --size 1M --ranks 1 --chunk 2Q").status == 2);
  CHECK(run_hugepin("arena create x --size 8M --ranks 1 --chunk 0").status == 2);
  Run bad_name = run_hugepin("arena create bad/name --size 8M --ranks 1");
  CHECK(bad_name.status == 2);
  CHECK(bad_name.out.find("invalid arena name 'bad/name'") != std::string::npos);
  CHECK(run_hugepin("arena destroy ../x").status == 2);
  // 4 KiB regions that do not fit the shm file system: refused before anything is written.
  const std::string huge = "huge-" + std::to_string(getpid());
  Run too_big = run_hugepin("arena create " + huge + " --size 40T --ranks 4 --pagesize 4K");
  CHECK(too_big.status == 1);
  CHECK(too_big.out.find("free: reserve hugepages") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists("/dev/shm/hugepin/" + huge));
}

TEST_CASE("bench ring runs the three queues and prints JSON") {
  Run run = run_hugepin("bench ring --count 20000 --repeat 1 --latency-samples 1000 --interval 1 --batch 1,8 --json");
  REQUIRE(run.status == 0);
  auto json = nlohmann::json::parse(run.out);
  CHECK(json["benchmark"] == "ring");
  CHECK(json["record_bytes"] == 32);
  CHECK((json["membarrier"] == "registered" || json["membarrier"] == "refused"));
  CHECK(json["cpus"].is_string());
  REQUIRE(json["rows"].size() == 7);  // ours, baseline, Boost for each batch; ours sleeping
  CHECK(json["rows"][0]["method"] == "hugepin ReportRing");
  CHECK(json["rows"][1]["method"] == "ReportRing v1 (baseline)");
  CHECK(json["rows"][1]["vs_baseline"] == 1.0);
  CHECK(json["rows"][2]["method"] == "Boost.Lockfree spsc_queue");
  CHECK(json["rows"][2]["vs_boost"] == 1.0);
  for (int row = 0; row < 3; ++row) CHECK(json["rows"][row]["latency_ns"]["p99"].get<double>() > 0);
  CHECK(json["rows"][3]["batch"] == 8);
  CHECK(json["rows"][3]["latency_ns"].is_null());
  CHECK(json["rows"][6]["method"] == "hugepin ReportRing, consumer sleeps");
  CHECK(json["rows"][6]["vs_boost"].get<double>() > 0);  // against the spinning Boost row of batch 1
  CHECK(json["rows"][0]["wakes_per_report"].is_null());
  // One push rings at most once: between no wake-up (the consumer never slept) and one a report.
  CHECK(json["rows"][6]["wakes_per_report"].get<double>() >= 0);
  CHECK(json["rows"][6]["wakes_per_report"].get<double>() <= 1);
  // The producer's prefetch: this CPU's default unless --prefetch names one (ipc/ring_prefetch.h).
  CHECK(json["prefetch_chosen_by"] == "cpu");
  CHECK(json["prefetch"] == (json["cpu_vendor"] == "AuthenticAMD" ? "read" : "write"));
}

TEST_CASE("bench ring runs with the producer's prefetch it is given, and refuses one it does not know") {
  Run run = run_hugepin("bench ring --count 2000 --repeat 1 --latency-samples 100 --batch 32 --prefetch off --json");
  REQUIRE(run.status == 0);
  auto json = nlohmann::json::parse(run.out);
  CHECK(json["prefetch"] == "off");
  CHECK(json["prefetch_chosen_by"] == "option");
  Run refused = run_hugepin("bench ring --count 2000 --repeat 1 --prefetch prefetchw");
  CHECK(refused.status != 0);
  CHECK(refused.out.find("--prefetch: prefetchw not in {auto,off,read,write}") != std::string::npos);
}

TEST_CASE("bench ring refuses --cpus it cannot use") {
  Run same = run_hugepin("bench ring --count 1000 --repeat 1 --latency-samples 100 --cpus 0,0");
  CHECK(same.status != 0);
  CHECK(same.out.find("two different CPUs") != std::string::npos);
}

TEST_CASE("bench pin runs its host rows alone and refuses to run nothing") {
  Run run = run_hugepin("bench pin --size 8M --threads 1 --pagesize 4K --repeat 1 --warmup 0 --gpu off --json");
  REQUIRE(run.status == 0);
  const auto json = nlohmann::json::parse(run.out);
  CHECK(json["host"]["rows"].size() == 2);  // arena, then 4 KiB mmap + touch
  CHECK_FALSE(json.contains("gpu"));

  Run nothing = run_hugepin("bench pin --size 8M --host off --gpu off");
  CHECK(nothing.status == 2);
  CHECK(nothing.out.find("--host off") != std::string::npos);
  CHECK(run_hugepin("bench pin --host maybe").status == 2);
}
