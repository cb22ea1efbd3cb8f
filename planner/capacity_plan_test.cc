// The capacity plan: the TP=2 x PP=2 example against a recorded eight-node host, page-size
// choice against recorded and hand-made pools, the JSON output, and every rejection.
#include "planner/capacity_plan.h"

#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <memory>

#include "base/os.h"
#include "base/size.h"
#include "hugemem/topology.h"
#include "planner/plan_json.h"
#include "planner/test_support.h"
#include "tests/support/temp_dir.h"

namespace hugepin::planner {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream file(path);
  REQUIRE(file.good());
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

PlanInput example(const std::string& name) {
  return parse_plan_input(read_text(hugepin::test::test_data_path("plans/" + name)));
}

// What the CLI gathers, from a recorded sysfs tree: the pool, and the node of each rank's GPU.
HostInfo recorded_host(const std::string& tree, const PlanInput& input) {
  std::unique_ptr<Os> os = make_rooted_os(hugepin::test::test_data_path("sysfs/" + tree));
  HostInfo host;
  host.pool = read_pool(*os);
  for (const RankInput& rank : input.ranks) {
    if (!rank.gpu_pci.empty()) host.gpu_nodes[rank.gpu_pci] = pci_device_node(*os, rank.gpu_pci);
  }
  return host;
}

// tp x pp ranks given by bytes per block: payload(pp_rank) for every rank of a stage.
PlanInput grid(uint32_t tp, uint32_t pp, uint64_t blocks_per_chunk, uint64_t cpu_bytes,
               const std::vector<uint64_t>& stage_payloads, uint64_t page_size = 4 * kKiB) {
  PlanInput input;
  input.tp = tp;
  input.pp = pp;
  input.blocks_per_chunk = blocks_per_chunk;
  input.cpu_bytes = cpu_bytes;
  input.page_size = page_size;
  for (uint32_t p = 0; p < pp; ++p) {
    for (uint32_t t = 0; t < tp; ++t) {
      RankInput rank;
      rank.tp_rank = t;
      rank.pp_rank = p;
      rank.num_blocks = 1024;
      rank.bytes_per_block = stage_payloads[p % stage_payloads.size()];
      input.ranks.push_back(rank);
    }
  }
  return input;
}

// Two nodes: 2M pages free 1000 on node 0, 512 on node 1, 1502 system-wide (10 reserved);
// 1G pages only on node 0 (4). Mounts for both (the recorded two-node tree, by hand).
HostInfo two_node_host() {
  HostInfo host;
  host.gpu_nodes = {{"0000:17:00.0", 0}, {"0000:ca:00.0", 1}};
  PoolState& pool = host.pool;
  pool.default_page_size = 2 * kMiB;
  pool.page_sizes = {2 * kMiB, kGiB};
  pool.nodes = {0, 1};
  pool.per_node = {{0, 2 * kMiB, 1024, 1000, 0, 0}, {0, kGiB, 4, 4, 0, 0},
                   {1, 2 * kMiB, 512, 512, 0, 0}, {1, kGiB, 0, 0, 0, 0}};
  pool.system = {{-1, 2 * kMiB, 1536, 1512, 0, 10}, {-1, kGiB, 4, 4, 0, 0}};
  pool.mounts = {{"/dev/hugepages", 2 * kMiB, "rw"}, {"/dev/hugepages1G", kGiB, "rw"}};
  return host;
}

// One rank per GPU of two_node_host, each with `bytes_per_block`, no page size asked.
PlanInput on_gpus(std::vector<std::string> gpus, uint64_t bytes_per_block, uint64_t cpu_bytes) {
  PlanInput input = grid(static_cast<uint32_t>(gpus.size()), 1, 1, cpu_bytes, {bytes_per_block}, 0);
  for (size_t i = 0; i < gpus.size(); ++i) input.ranks[i].gpu_pci = gpus[i];
  return input;
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

TEST_CASE("plan JSON: nulls for a rank without a GPU and for 4K pages, no groups for bytes_per_block") {
  nlohmann::ordered_json json = plan_json(make_plan(grid(1, 1, 1, 5000, {5000}), {}));
  CHECK(json["ranks"][0]["gpu_pci"].is_null());
  CHECK(json["ranks"][0]["numa_node"] == -1);
  CHECK(json["ranks"][0]["groups"] == nlohmann::ordered_json::array());
  CHECK(json["ranks"][0]["storages"] == nlohmann::ordered_json::array());
  CHECK(json["pool"][0]["node"] == -1);
  CHECK(json["pool"][0]["pages_available"].is_null());
  CHECK(json["page_size_choice"] == "requested");
  CHECK(json["notes"].size() == 1);
}

TEST_CASE("chunk count: floor of the budget over one chunk of every rank") {
  // 10 blocks per chunk of 100 + 300 bytes: a chunk is 4000 bytes.
  CHECK_REJECTS(make_plan(grid(1, 2, 10, 3999, {100, 300}), {}),
                "cpu_bytes = 3999: less than one chunk; the smallest plan needs 4000 bytes (blocks_per_chunk 10 * 400");
  CapacityPlan one = make_plan(grid(1, 2, 10, 4000, {100, 300}), {});
  CHECK(one.chunk_count == 1);
  CHECK(one.ranks[0].payload_bytes == 1000);
  CHECK(one.ranks[1].payload_bytes == 3000);
  CHECK(make_plan(grid(1, 2, 10, 7999, {100, 300}), {}).chunk_count == 1);
  CHECK(make_plan(grid(1, 2, 10, 8000, {100, 300}), {}).chunk_count == 2);
}

TEST_CASE("regions round up to the page; the rounding is reported, never payload") {
  CapacityPlan plan = make_plan(grid(1, 1, 1, 5000, {5000}), {});
  const RankPlan& rank = plan.ranks[0];
  CHECK(rank.payload_bytes == 5000);
  CHECK(rank.region_bytes == 8192);
  CHECK(rank.rounding_bytes == 3192);
  CHECK(rank.pages == 2);
  CHECK(plan.payload_bytes == 5000);
  CHECK(plan.rounding_bytes == 3192);
  // 4 KiB pages come from shared memory: nothing to count in a pool.
  CHECK(plan.pool_can_serve);
  REQUIRE(plan.pool.size() == 1);
  CHECK(plan.pool[0].node == -1);
  CHECK_FALSE(plan.pool[0].pages_available.has_value());
  CHECK(plan.notes.size() == 1);
}

TEST_CASE("best available page size: the largest that every node's pool serves now") {
  HostInfo host = two_node_host();
  // 2 GiB on node 0 only: its four 1G pages serve.
  CapacityPlan node0 = make_plan(on_gpus({"0000:17:00.0"}, 2 * kGiB, 2 * kGiB), host);
  CHECK(node0.page_size == kGiB);
  CHECK(node0.page_size_choice == PageSizeChoice::kBestAvailable);
  CHECK(node0.ranks[0].numa_node == 0);
  CHECK(node0.ranks[0].pages == 2);

  // One GiB on each node: node 1 has no 1G pages, both have 2M pages.
  CapacityPlan both = make_plan(on_gpus({"0000:17:00.0", "0000:ca:00.0"}, kGiB, 2 * kGiB), host);
  CHECK(both.page_size == 2 * kMiB);
  CHECK(both.pool_can_serve);
  REQUIRE(both.pool.size() == 2);
  CHECK(both.pool[1].node == 1);
  CHECK(both.pool[1].pages_needed == 512);
  CHECK(both.pool[1].pages_available == uint64_t{512});
}

TEST_CASE("a pool that cannot serve: the fix lines, the system-wide count, the 2M fallback") {
  HostInfo host = two_node_host();
  // 2000 MiB on node 0 (1000 pages, all free) and 1024 MiB on node 1 (512): each node serves, but
  // 10 pages are reserved system-wide, so the system has 1502 for the 1512 needed.
  CapacityPlan tight = make_plan(on_gpus({"0000:17:00.0", "0000:ca:00.0"}, 1000 * 2 * kMiB, 3000 * 2 * kMiB), host);
  CHECK(tight.page_size_choice == PageSizeChoice::kFallback);
  CHECK_FALSE(tight.pool_can_serve);
  REQUIRE(tight.pool.size() == 2);
  CHECK(tight.pool[0].can_serve);
  CHECK(tight.pool[0].pages_needed == 1000);
  CHECK(tight.pool[1].pages_needed == 1000);
  CHECK_FALSE(tight.pool[1].can_serve);
  CHECK(tight.pool[1].fix == pool_set_hint(host.pool, 1, 2 * kMiB, 488));
  CHECK(tight.notes[0].find("no hugepage size can hold this plan now") == 0);

  PlanInput split = on_gpus({"0000:17:00.0", "0000:ca:00.0"}, 1, 0);
  split.ranks[0].bytes_per_block = 1000 * 2 * kMiB;
  split.ranks[1].bytes_per_block = 512 * 2 * kMiB;
  split.cpu_bytes = 1512 * 2 * kMiB;
  split.page_size = 2 * kMiB;
  CapacityPlan short_system = make_plan(split, host);
  CHECK(short_system.page_size_choice == PageSizeChoice::kRequested);
  CHECK(short_system.pool[0].can_serve);
  CHECK(short_system.pool[1].can_serve);
  CHECK_FALSE(short_system.pool_can_serve);
  REQUIRE(short_system.notes.size() == 1);
  CHECK(short_system.notes[0] == "1512 2M pages needed in all, 1502 free system-wide: " +
                                     pool_set_hint(host.pool, -1, 2 * kMiB, 10));
}

TEST_CASE("no pool at all (the recorded one-node tree): planned on 2M with the fix, unmounted noted") {
  PlanInput input = grid(1, 1, 1, 3 * kMiB, {3 * kMiB}, 0);
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

TEST_CASE("a page size the kernel lacks: no fix line, a note") {
  HostInfo host = two_node_host();
  host.pool.page_sizes = {2 * kMiB};
  host.pool.per_node.erase(host.pool.per_node.begin() + 3);
  host.pool.per_node.erase(host.pool.per_node.begin() + 1);
  host.pool.system.pop_back();
  PlanInput input = on_gpus({"0000:17:00.0"}, kGiB, kGiB);
  input.page_size = kGiB;
  CapacityPlan plan = make_plan(input, host);
  CHECK_FALSE(plan.pool_can_serve);
  REQUIRE(plan.pool.size() == 1);
  CHECK_FALSE(plan.pool[0].can_serve);
  CHECK(plan.pool[0].fix.empty());
  CHECK(plan.notes[0] == "this kernel has no 1G hugepages");
}

TEST_CASE("every rejection names the field and value") {
  HostInfo host = two_node_host();
  PlanInput input = grid(2, 2, 1, kGiB, {4096});

  PlanInput bad = input;
  bad.ranks.pop_back();
  CHECK_REJECTS(make_plan(bad, host), "ranks = 3 ranks: tp * pp = 2 * 2 = 4 expected; missing (tp_rank, pp_rank): (1, 1)");
  CHECK(test::error_message([&] { make_plan(bad, host); }).find("...") == std::string::npos);
  bad = grid(4, 4, 1, kGiB, {4096});
  bad.ranks.erase(bad.ranks.begin() + 1, bad.ranks.begin() + 7);
  CHECK_REJECTS(make_plan(bad, host), "ranks = 10 ranks: tp * pp = 4 * 4 = 16 expected; missing (tp_rank, pp_rank): "
                                      "(1, 0), (2, 0), (3, 0), (0, 1), ...");
  bad = input;
  bad.ranks[3].tp_rank = 0;
  CHECK_REJECTS(make_plan(bad, host), "ranks[3] = (tp_rank 0, pp_rank 1): duplicate of ranks[2]");
  bad = input;
  bad.ranks[1].tp_rank = 2;
  CHECK_REJECTS(make_plan(bad, host), "ranks[1].tp_rank = 2: must be below tp = 2");
  bad = input;
  bad.ranks[1].pp_rank = 7;
  CHECK_REJECTS(make_plan(bad, host), "ranks[1].pp_rank = 7: must be below pp = 2");
  bad = input;
  bad.ranks.push_back(bad.ranks[0]);
  CHECK_REJECTS(make_plan(bad, host), "ranks[4] = (tp_rank 0, pp_rank 0): duplicate of ranks[0]");

  bad = input;
  bad.ranks[2].bytes_per_block.reset();
  CHECK_REJECTS(make_plan(bad, host), "ranks[2]: a rank without KV tensors");
  bad.ranks[2].tensors = {test::contiguous("x", "s", {1024, 64}, 2)};
  bad.ranks[2].bytes_per_block = 128;
  CHECK_REJECTS(make_plan(bad, host), "ranks[2].bytes_per_block = 128: give tensors or bytes_per_block, not both");
  bad.ranks[2].bytes_per_block.reset();
  bad.ranks[2].tensors[0].group = kMaxGroups;
  CHECK_REJECTS(make_plan(bad, host), "ranks[2].tensors[0].group = 1024: must be below 1024");
  bad.ranks[2].tensors[0].group = 0;
  bad.ranks[2].tensors[0].strides = {32, 1};  // blocks 64 bytes apart in 128-byte pages
  bad.ranks[2].tensors[0].storage_bytes = 1024 * 128;
  CHECK_REJECTS(make_plan(bad, host), "ranks[2].tensors[0].strides = [32, 1]: no dimension of size num_blocks 1024");
  bad = input;
  bad.ranks[0].bytes_per_block = 0;
  CHECK_REJECTS(make_plan(bad, host), "ranks[0].bytes_per_block = 0: zero payload");
  bad = input;
  bad.ranks[0].num_blocks = 0;
  CHECK_REJECTS(make_plan(bad, host), "ranks[0].num_blocks = 0");
  bad = input;
  bad.ranks[1].gpu_pci = "0000:99:00.0";
  CHECK_REJECTS(make_plan(bad, host), R"(ranks[1].gpu_pci = "0000:99:00.0": no such PCI device on this host)");

  bad = input;
  bad.dp = 2;
  CHECK_REJECTS(make_plan(bad, host), "dp = 2: only dp = 1 is supported");
  bad = input;
  bad.pcp = 0;
  CHECK_REJECTS(make_plan(bad, host), "pcp = 0: only pcp = 1 is supported");
  bad = input;
  bad.dcp = 4;
  CHECK_REJECTS(make_plan(bad, host), "dcp = 4: only dcp = 1 is supported");
  bad = input;
  bad.tp = 0;
  CHECK_REJECTS(make_plan(bad, host), "tp = 0: must be at least 1");
  bad = input;
  bad.blocks_per_chunk = 0;
  CHECK_REJECTS(make_plan(bad, host), "blocks_per_chunk = 0: must be at least 1");
  bad = input;
  bad.page_size = 64 * kKiB;
  CHECK_REJECTS(make_plan(bad, host), "page_size = 64K: must be 4K, 2M or 1G");
  bad = input;
  bad.cpu_bytes = 16383;
  CHECK_REJECTS(make_plan(bad, host), "cpu_bytes = 16383: less than one chunk; the smallest plan needs 16384 bytes");
}

TEST_CASE("integer overflow anywhere is refused") {
  HostInfo host = two_node_host();
  CHECK_REJECTS(make_plan(grid(1, 1, uint64_t{1} << 40, UINT64_MAX, {uint64_t{1} << 30}), host),
                "blocks_per_chunk * sum of rank payloads per block: 1099511627776 * 1073741824 overflows 64 bits");
  CHECK_REJECTS(make_plan(grid(1, 2, 1, UINT64_MAX, {UINT64_MAX - 1, 2}), host),
                "sum of rank payloads per block: 18446744073709551614 + 2 overflows 64 bits");
  // A region within 2^64 whose rounding up to the page is not.
  CHECK_REJECTS(make_plan(grid(1, 1, 1, UINT64_MAX, {UINT64_MAX - 5}), host),
                "overflows 64 bits when rounded up to 4K pages");
  // Payloads that fit together, regions that do not.
  uint64_t half = (uint64_t{1} << 63) - 1;
  CHECK_REJECTS(make_plan(grid(1, 2, 1, UINT64_MAX, {half, half}), host), "total region bytes");
}

}  // namespace hugepin::planner
