// The capacity plan: page-size choice against the hand-made two-node host (planner/test_host.h),
// the JSON output, the chunk arithmetic, and every rejection. The TP=2 x PP=2 example on recorded
// hosts: session/host_plan_test.cc.
#include "planner/capacity_plan.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "base/size.h"
#include "planner/plan_json.h"
#include "planner/test_support.h"

namespace hugepin::planner {
namespace {

using test::two_node_host;

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

// One rank per GPU of two_node_host, each with `bytes_per_block`, no page size asked.
PlanInput on_gpus(std::vector<std::string> gpus, uint64_t bytes_per_block, uint64_t cpu_bytes) {
  PlanInput input = grid(static_cast<uint32_t>(gpus.size()), 1, 1, cpu_bytes, {bytes_per_block}, 0);
  for (size_t i = 0; i < gpus.size(); ++i) input.ranks[i].gpu_pci = gpus[i];
  return input;
}

}  // namespace

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
  CHECK(tight.pool[1].fix == "hugepin pool set 2000M --node 1 --pagesize 2M");  // 512 held + 488
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
  CHECK(short_system.notes[0] ==  // 1536 held + 10
        "1512 2M pages needed in all, 1502 free system-wide: hugepin pool set 3092M --pagesize 2M");
}

TEST_CASE("a page size the kernel lacks: no fix line, a note") {
  HostInfo host = two_node_host();
  host.pool.page_sizes = {2 * kMiB};
  std::erase_if(host.pool.pages, [](const PoolPages& row) { return row.page_size == kGiB; });
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
