// Planning on a host read the way hugepin reads one (read_host_info, host_pool): the TP=2 x PP=2
// example on the recorded eight-node tree, a host with no pool (the recorded one-node tree), and
// the pool as the planner takes it from what the kernel counts.
#include "session/host_plan.h"

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "base/os.h"
#include "base/size.h"
#include "planner/plan_json.h"
#include "planner/test_host.h"
#include "tests/support/file_text.h"
#include "tests/support/temp_dir.h"

namespace hugepin {

using namespace planner;

namespace {

PlanInput example(const std::string& name) {
  const std::string text = hugepin::test::file_text(hugepin::test::test_data_path("plans/" + name));
  REQUIRE_FALSE(text.empty());
  return parse_plan_input(text);
}

// What the CLI gathers, from a recorded sysfs tree: the pool, and the node of each rank's GPU.
HostInfo recorded_host(const std::string& tree, const PlanInput& input) {
  std::unique_ptr<Os> os = make_rooted_os(hugepin::test::test_data_path("sysfs/" + tree));
  return read_host_info(*os, input);
}

}  // namespace

TEST_CASE("TP=2 x PP=2 hybrid example: one chunk count, unequal stage regions, GPU nodes, 1G pages") {
  PlanInput input = example("tp2_pp2_hybrid.json");
  CapacityPlan plan = make_plan(input, recorded_host("eight-node", input));
  // Stage 0: two attention layers of 2 x 16384 bytes per block; stage 1: two more and a Mamba
  // layer whose conv and SSM states share one storage of 32 KiB pages.
  constexpr uint64_t kStage0 = 65536;
  constexpr uint64_t kStage1 = 98304;
  CHECK(plan.payload_bytes_per_block == 2 * kStage0 + 2 * kStage1);
  CHECK(plan.chunk_bytes == 16 * (2 * kStage0 + 2 * kStage1));
  CHECK(plan.chunk_count == 20000000000ull / plan.chunk_bytes);
  CHECK(plan.chunk_count == 3814);
  CHECK(plan.payload_bytes == 3814 * plan.chunk_bytes);
  CHECK(plan.payload_bytes <= plan.cpu_bytes);
  CHECK(plan.payload_bytes + plan.chunk_bytes > plan.cpu_bytes);

  REQUIRE(plan.ranks.size() == 4);
  const int nodes[] = {0, 1, 2, 3};
  for (size_t i = 0; i < 4; ++i) {
    const RankPlan& rank = plan.ranks[i];
    CHECK(rank.rank == i);
    CHECK(rank.tp_rank == i % 2);
    CHECK(rank.pp_rank == i / 2);
    CHECK(rank.numa_node == nodes[i]);
    uint64_t per_block = rank.pp_rank == 0 ? kStage0 : kStage1;
    CHECK(rank.payload_bytes_per_block == per_block);
    CHECK(rank.payload_bytes == 3814 * 16 * per_block);
    CHECK(rank.region_bytes == (rank.pp_rank == 0 ? 4 : 6) * kGiB);
    CHECK(rank.rounding_bytes == rank.region_bytes - rank.payload_bytes);
    CHECK(rank.pages == (rank.pp_rank == 0 ? 4 : 6));
  }
  // The Mamba layer's two state tensors are one storage, copied once.
  CHECK(plan.ranks[2].layout.storages.size() == 3);
  CHECK(plan.ranks[2].layout.storages[2].tensor == "layers.4.mamba.conv");

  // Group 1 (Mamba) has no layers on stage 0: it keeps its index with no payload there.
  CHECK(plan.groups == std::vector<uint32_t>{0, 1});
  REQUIRE(plan.ranks[0].groups.size() == 2);
  CHECK(plan.ranks[0].groups[0].bytes_per_block == kStage0);
  CHECK(plan.ranks[0].groups[1].group == 1);
  CHECK(plan.ranks[0].groups[1].bytes_per_block == 0);
  CHECK(plan.ranks[3].groups[1].bytes_per_block == 32768);

  // Every node has 16 free 1 GiB pages and a 1G mount: the largest size serves.
  CHECK(plan.page_size == kGiB);
  CHECK(plan.page_size_choice == PageSizeChoice::kBestAvailable);
  CHECK(plan.pool_can_serve);
  REQUIRE(plan.pool.size() == 4);
  CHECK(plan.pool[2].node == 2);
  CHECK(plan.pool[2].pages_needed == 6);
  CHECK(plan.pool[2].pages_available == uint64_t{16});
  CHECK(plan.pool[2].can_serve);
  CHECK(plan.pool[2].fix.empty());
  CHECK(plan.region_bytes == 20 * kGiB);
  CHECK(plan.rounding_bytes == plan.region_bytes - plan.payload_bytes);
}

TEST_CASE("plan JSON carries the documented fields") {
  PlanInput input = example("tp2_pp2_hybrid.json");
  nlohmann::ordered_json json = plan_json(make_plan(input, recorded_host("eight-node", input)));
  CHECK(json["version"] == 1);
  CHECK(json["chunk_count"] == 3814);
  CHECK(json["blocks_per_chunk"] == 16);
  CHECK(json["cpu_bytes"] == 20000000000ull);
  CHECK(json["page_size"] == kGiB);
  CHECK(json["page_size_choice"] == "best_available");
  CHECK(json["unused_bytes"] == 20000000000ull - json["payload_bytes"].get<uint64_t>());
  const auto& rank = json["ranks"][3];
  CHECK(rank["tp_rank"] == 1);
  CHECK(rank["pp_rank"] == 1);
  CHECK(rank["gpu_pci"] == "0000:5d:00.0");
  CHECK(rank["numa_node"] == 3);
  CHECK(rank["payload_bytes_per_block"] == 98304);
  CHECK(rank["region_bytes"] == 6 * kGiB);
  CHECK(rank["groups"][1]["payload_bytes_per_block"] == 32768);
  CHECK(rank["storages"][0]["segments"] == 2);
  CHECK(rank["storages"][0]["outer_dim"] == 0);
  CHECK(json["pool"][0]["pages_available"] == 16);
  CHECK(json["pool"][0]["fix"] == "");
}

TEST_CASE("no pool at all (the recorded one-node tree): planned on 2M with the fix, unmounted noted") {
  PlanInput input;  // one rank of 3 MiB per block, one block per chunk, no page size asked
  input.tp = 1;
  input.pp = 1;
  input.blocks_per_chunk = 1;
  input.cpu_bytes = 3 * kMiB;
  input.ranks.push_back({0, 0, "", 1024, {}, 3 * kMiB});
  CapacityPlan plan = make_plan(input, recorded_host("one-node", input));
  CHECK(plan.page_size == 2 * kMiB);
  CHECK(plan.page_size_choice == PageSizeChoice::kFallback);
  CHECK(plan.ranks[0].region_bytes == 4 * kMiB);
  CHECK(plan.ranks[0].rounding_bytes == kMiB);
  REQUIRE(plan.pool.size() == 1);
  CHECK(plan.pool[0].pages_available == uint64_t{0});
  CHECK(plan.pool[0].fix == "hugepin pool set 4M --pagesize 2M");
  CHECK(plan.notes.size() == 2);
  CHECK(plan.notes[1] == "no hugetlbfs mount for 2M pages: hugepin pool mount --pagesize 2M");
}

TEST_CASE("the pool as the planner takes it: pages held, and those a mapping can get, per node and in all") {
  // The kernel's counts behind planner::test::two_node_host: 10 of the 1512 free 2M pages are
  // reserved system-wide; node 1's 1G row holds nothing; a third mount repeats the 2M size.
  PoolState pool;
  pool.default_page_size = 2 * kMiB;
  pool.page_sizes = {2 * kMiB, kGiB};
  pool.nodes = {0, 1};
  pool.per_node = {{0, 2 * kMiB, 1024, 1000, 0, 0}, {0, kGiB, 4, 4, 0, 0}, {1, 2 * kMiB, 512, 512, 0, 0}, {1, kGiB, 0, 0, 0, 0}};
  pool.system = {{-1, 2 * kMiB, 1536, 1512, 0, 10}, {-1, kGiB, 4, 4, 0, 0}};
  pool.mounts = {{"/dev/hugepages", 2 * kMiB, "rw"}, {"/dev/hugepages1G", kGiB, "rw"}, {"/mnt/huge", 2 * kMiB, "rw"}};
  const HostPool expected = planner::test::two_node_host().pool;
  const HostPool converted = host_pool(pool);
  CHECK(converted.page_sizes == expected.page_sizes);
  CHECK(converted.mounted_page_sizes == expected.mounted_page_sizes);
  CHECK(converted.pages == expected.pages);
  // No mount for a size: not mounted, still supported.
  pool.mounts.resize(1);
  CHECK(host_pool(pool).mounted_page_sizes == std::vector<uint64_t>{2 * kMiB});
  CHECK(host_pool(pool).supports(kGiB));
}

}  // namespace hugepin
