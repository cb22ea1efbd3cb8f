// `hugepin plan` and `hugepin arena create --plan` as users run them: the table, JSON that parses
// and matches the table, one-line errors with exit 1 for a rejected plan, exit 2 for bad usage,
// and an arena made exactly as planned.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using hugepin::test::run_hugepin;
using Run = hugepin::test::CommandResult;

std::string tree(const std::string& name) { return hugepin::test::test_data_path("sysfs/" + name); }
std::string plan_file(const std::string& name) { return hugepin::test::test_data_path("plans/" + name); }

std::string write_file(const std::string& dir, const std::string& name, const std::string& text) {
  std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

size_t lines(const std::string& text) { return static_cast<size_t>(std::count(text.begin(), text.end(), '\n')); }

}  // namespace

TEST_CASE("plan prints a table per rank and the totals") {
  Run run = run_hugepin("--sysroot " + tree("eight-node") + " plan --input " + plan_file("tp2_pp2_hybrid.json"));
  REQUIRE(run.status == 0);
  CHECK(run.out.find("RANK  TP  PP  GPU           NODE  PAYLOAD/BLOCK") == 0);
  // Rank 3: stage 1 on GPU 0000:5d:00.0 (node 3), 98304 bytes per block, 6 GiB in six 1G pages.
  CHECK(run.out.find("   3   1   1  0000:5d:00.0     3          98304") != std::string::npos);
  CHECK(run.out.find("6442450944") != std::string::npos);
  CHECK(run.out.find("chunks:   3814 x 16 blocks, shared by all 4 ranks (tp 2 x pp 2)") != std::string::npos);
  CHECK(run.out.find("on 1G pages (best_available)") != std::string::npos);
  CHECK(run.out.find("groups:   0, 1") != std::string::npos);
  CHECK(run.out.find("pool:     can serve this plan now") != std::string::npos);
}

TEST_CASE("plan --json parses and carries the documented fields") {
  Run run = run_hugepin("--sysroot " + tree("eight-node") + " plan --json --input " + plan_file("tp2_pp2_hybrid.json"));
  REQUIRE(run.status == 0);
  auto json = nlohmann::json::parse(run.out);
  CHECK(json["version"] == 1);
  CHECK(json["chunk_count"] == 3814);
  CHECK(json["blocks_per_chunk"] == 16);
  REQUIRE(json["ranks"].size() == 4);
  CHECK(json["ranks"][0]["tp_rank"] == 0);
  CHECK(json["ranks"][0]["pp_rank"] == 0);
  CHECK(json["ranks"][0]["payload_bytes_per_block"] == 65536);
  CHECK(json["ranks"][0]["region_bytes"] == 4294967296ull);
  CHECK(json["ranks"][0]["numa_node"] == 0);
  CHECK(json["ranks"][0]["groups"][1] == nlohmann::json({{"group", 1}, {"payload_bytes_per_block", 0}}));
  CHECK(json["ranks"][2]["numa_node"] == 2);
  CHECK(json["pool"][3]["pages_needed"] == 6);
}

TEST_CASE("a rejected plan exits 1 with one line naming the field") {
  hugepin::test::TempDir dir;
  std::string path = write_file(dir.path(), "bad.json", R"({"tp": 2, "pp": 1, "blocks_per_chunk": 1, "cpu_bytes": 1e9,
      "ranks": [{"tp_rank": 0, "pp_rank": 0, "num_blocks": 8, "bytes_per_block": 64},
                {"tp_rank": 0, "pp_rank": 0, "num_blocks": 8, "bytes_per_block": 64}]})");
  Run run = run_hugepin("plan --input " + path);
  CHECK(run.status == 1);
  CHECK(lines(run.out) == 1);
  CHECK(run.out == "hugepin: error: " + path + ": ranks[1] = (tp_rank 0, pp_rank 0): duplicate of ranks[0]\n");

  path = write_file(dir.path(), "small.json", R"({"tp": 1, "pp": 1, "blocks_per_chunk": 4, "cpu_bytes": 100,
      "ranks": [{"tp_rank": 0, "pp_rank": 0, "num_blocks": 8, "bytes_per_block": 64}]})");
  run = run_hugepin("plan --input " + path);
  CHECK(run.status == 1);
  CHECK(lines(run.out) == 1);
  CHECK(run.out.find("cpu_bytes = 100: less than one chunk; the smallest plan needs 256 bytes") != std::string::npos);

  path = write_file(dir.path(), "gpu.json", R"({"tp": 1, "pp": 1, "blocks_per_chunk": 4, "cpu_bytes": 1000,
      "ranks": [{"tp_rank": 0, "pp_rank": 0, "num_blocks": 8, "bytes_per_block": 64, "gpu_pci": "0000:99:00.0"}]})");
  run = run_hugepin("--sysroot " + tree("two-node") + " plan --input " + path);
  CHECK(run.status == 1);
  CHECK(lines(run.out) == 1);
  CHECK(run.out.find(R"(ranks[0].gpu_pci = "0000:99:00.0": no such PCI device on this host)") != std::string::npos);

  // The input's own errors come before the host's: dp is reported, not the absent GPUs.
  std::ifstream example(plan_file("tp2_pp2_hybrid.json"));
  std::string text((std::istreambuf_iterator<char>(example)), std::istreambuf_iterator<char>());
  text.replace(text.find(R"("dp": 1)"), 7, R"("dp": 2)");
  path = write_file(dir.path(), "dp.json", text);
  run = run_hugepin("plan --input " + path);
  CHECK(run.status == 1);
  CHECK(run.out == "hugepin: error: " + path + ": dp = 2: only dp = 1 is supported (one engine per plan)\n");

  path = write_file(dir.path(), "broken.json", "{\"tp\": 1,");
  run = run_hugepin("plan --json --input " + path);
  CHECK(run.status == 1);
  CHECK(lines(run.out) == 1);
  CHECK(run.out.find("input is not valid JSON") != std::string::npos);
}

TEST_CASE("bad usage of plan exits 2") {
  CHECK(run_hugepin("plan").status == 2);                                     // --input missing
  CHECK(run_hugepin("plan --input /no/such/plan.json").status == 2);          // not a file
  CHECK(run_hugepin("plan --input " + plan_file("small_4k.json") + " --yaml").status == 2);
  CHECK(run_hugepin("plan --help").status == 0);
  // --plan excludes the options it replaces; create needs one or the other.
  CHECK(run_hugepin("arena create x --plan " + plan_file("small_4k.json") + " --size 1G --ranks 2").status == 2);
  CHECK(run_hugepin("arena create x --plan " + plan_file("small_4k.json") + " --pagesize 2M").status == 2);
  CHECK(run_hugepin("arena create x").status == 2);
  CHECK(run_hugepin("arena create x --ranks 2").status == 2);
}

TEST_CASE("arena create --plan makes exactly the planned regions") {
  std::string name = "plan-cli-test-" + std::to_string(getpid());
  Run plan = run_hugepin("plan --json --input " + plan_file("small_4k.json"));
  REQUIRE(plan.status == 0);
  auto planned = nlohmann::json::parse(plan.out);
  CHECK(planned["page_size"] == 4096);

  Run create = run_hugepin("arena create " + name + " --json --plan " + plan_file("small_4k.json"));
  REQUIRE_MESSAGE(create.status == 0, create.out);
  auto report = nlohmann::json::parse(create.out.substr(create.out.find('{')));
  Run list = run_hugepin("arena list --json");
  Run destroy = run_hugepin("arena destroy " + name);
  CHECK(destroy.status == 0);

  REQUIRE(report["regions"].size() == planned["ranks"].size());
  for (size_t i = 0; i < planned["ranks"].size(); ++i) {
    const auto& rank = planned["ranks"][i];
    const auto& region = report["regions"][i];
    CHECK(region["rank"] == rank["rank"]);
    CHECK(region["bytes_requested"] == rank["region_bytes"]);
    CHECK(region["bytes"] == rank["region_bytes"]);
    CHECK(region["node_requested"] == rank["numa_node"]);
    CHECK(region["placement"]["page_size"] == 4096);
  }
  // Unequal stages: 79 pages for stage 0's 320000 bytes of payload, 160 for stage 1's 655360.
  CHECK(planned["ranks"][0]["region_bytes"] == 79 * 4096);
  CHECK(planned["ranks"][1]["region_bytes"] == 160 * 4096);

  REQUIRE(list.status == 0);
  auto arenas = nlohmann::json::parse(list.out)["arenas"];
  auto it = std::find_if(arenas.begin(), arenas.end(), [&](const nlohmann::json& arena) { return arena["name"] == name; });
  REQUIRE(it != arenas.end());
  CHECK((*it)["regions"].size() == 2);
  CHECK((*it)["regions"][1]["bytes"] == 160 * 4096);
}

TEST_CASE("plan --input refuses what is not a regular file, without reading it") {
  Run zero = run_hugepin("plan --input /dev/zero");  // would be read until memory ran out
  CHECK(zero.status == 1);
  CHECK(zero.out == "hugepin: error: refusing plan input /dev/zero: it is a character device, not a regular file\n");
}

// Issue 20, item 8: a plan that names a field twice took the last value; a plan of 131,072 ranks
// was accepted where arenas stop at 65,536.
TEST_CASE("a plan naming a field twice, or more ranks than an arena has, is rejected naming it") {
  hugepin::test::TempDir dir;
  std::string path = write_file(dir.path(), "twice.json", R"({"tp": 1, "pp": 1, "blocks_per_chunk": 4, "cpu_bytes": 1e9,
      "ranks": [{"tp_rank": 0, "pp_rank": 0, "num_blocks": 8, "bytes_per_block": 64, "bytes_per_block": 4096}]})");
  Run run = run_hugepin("plan --input " + path);
  CHECK(run.status == 1);
  CHECK(run.out == "hugepin: error: " + path +
                       ": ranks[0].bytes_per_block: given twice (a plan names each field once; which one was meant?)\n");

  path = write_file(dir.path(), "huge.json", R"({"tp": 131072, "pp": 1, "blocks_per_chunk": 1, "cpu_bytes": 1e12,
      "ranks": [{"tp_rank": 0, "pp_rank": 0, "num_blocks": 8, "bytes_per_block": 64}]})");
  run = run_hugepin("plan --input " + path);
  CHECK(run.status == 1);
  CHECK(run.out == "hugepin: error: " + path + ": tp * pp = 131072 * 1 = 131072: more ranks than the 65536 an arena may have\n");
}
