// Properties of plans over generated layouts (fixed seeds): the payload of all ranks never exceeds
// cpu_bytes and one more chunk would; regions cover their payload by less than a page; payloads
// follow from the layouts; over TP in {1,2,4,8} x PP in {1,2,3,4,5,7,8,16,17,32} with unequal
// pipeline stages.
#include <doctest/doctest.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <random>
#include <set>

#include "base/size.h"
#include "planner/capacity_plan.h"
#include "planner/test_support.h"

namespace hugepin::planner {
namespace {

using Rng = std::mt19937_64;

uint64_t pick(Rng& rng, std::initializer_list<uint64_t> values) {
  return *(values.begin() + rng() % values.size());
}

// One pipeline stage's KV tensors on each of its TP ranks, and their payload per block, built
// independently of the planner: each layer kind's bytes per block follow from its shape.
struct Stage {
  std::vector<TensorDescriptor> tensors;
  uint64_t bytes_per_block = 0;
};

void add_layer(Rng& rng, Stage& stage, uint64_t num_blocks, uint32_t tp, size_t layer) {
  std::string name = "layers." + std::to_string(layer);
  uint64_t block_size = pick(rng, {16, 32});
  uint64_t heads = std::max<uint64_t>(1, pick(rng, {8, 16, 32}) / tp);
  uint64_t head_dim = pick(rng, {64, 128});
  uint64_t element_size = pick(rng, {1, 2, 4});
  switch (rng() % 4) {
    case 0:  // FlashAttention: K/V outermost, two segments
      stage.tensors.push_back(test::kv_outer(name, name, num_blocks, block_size, heads, head_dim, element_size, 0));
      stage.bytes_per_block += 2 * block_size * heads * head_dim * element_size;
      break;
    case 1:  // FlashInfer: blocks outermost
      stage.tensors.push_back(test::blocks_outer(name, name, num_blocks, block_size, heads, head_dim, element_size, 0));
      stage.bytes_per_block += 2 * block_size * heads * head_dim * element_size;
      break;
    case 2: {  // MLA latent cache (not sharded by TP)
      uint64_t latent = pick(rng, {512, 576});
      stage.tensors.push_back(test::contiguous(name, name, {num_blocks, block_size, latent}, 2, 0));
      stage.bytes_per_block += block_size * latent * 2;
      break;
    }
    default: {  // Mamba: conv and SSM states in one storage of padded pages, group 1
      uint64_t page = pick(rng, {16384, 65536, 262144});
      stage.tensors.push_back(test::state(name + ".conv", name, num_blocks, {3, 512 / tp}, page, 2, 1));
      stage.tensors.push_back(test::state(name + ".ssm", name, num_blocks, {8 / std::min<uint32_t>(tp, 8), 16, 16}, page, 4, 1));
      stage.bytes_per_block += page;
      break;
    }
  }
  if (rng() % 4 == 0) {  // another layer's view of the same storage: no more payload
    TensorDescriptor alias = stage.tensors.back();
    alias.name += ".alias";
    stage.tensors.push_back(alias);
  }
}

Stage make_stage(Rng& rng, uint32_t index, uint64_t num_blocks, uint32_t tp, size_t* layer) {
  Stage stage;
  size_t layers = 1 + rng() % 3 + index % 3;
  for (size_t i = 0; i < layers; ++i) add_layer(rng, stage, num_blocks, tp, (*layer)++);
  return stage;
}

struct Generated {
  PlanInput input;
  std::vector<uint64_t> stage_payloads;
};

Generated generate(Rng& rng, uint32_t tp, uint32_t pp) {
  Generated generated;
  PlanInput& input = generated.input;
  input.tp = tp;
  input.pp = pp;
  input.blocks_per_chunk = pick(rng, {1, 4, 16, 64, 256});
  input.page_size = pick(rng, {4 * kKiB, 2 * kMiB, kGiB});
  uint64_t num_blocks = pick(rng, {1, 2, 3, 7, 64, 1000, 4096});
  size_t layer = 0;
  std::vector<Stage> stages;
  for (uint32_t p = 0; p < pp; ++p) stages.push_back(make_stage(rng, p, num_blocks, tp, &layer));
  if (pp > 1 && stages[0].bytes_per_block == stages[1].bytes_per_block) {
    add_layer(rng, stages[0], num_blocks, tp, layer++);  // stages differ, as real splits do
  }
  uint64_t sum = 0;
  for (const Stage& stage : stages) {
    generated.stage_payloads.push_back(stage.bytes_per_block);
    sum += stage.bytes_per_block * tp;
  }
  // Ranks listed in a shuffled order: the plan orders them by flat rank.
  for (uint32_t p = 0; p < pp; ++p) {
    for (uint32_t t = 0; t < tp; ++t) {
      RankInput rank;
      rank.tp_rank = t;
      rank.pp_rank = p;
      rank.num_blocks = num_blocks;
      rank.tensors = stages[p].tensors;
      input.ranks.push_back(rank);
    }
  }
  std::shuffle(input.ranks.begin(), input.ranks.end(), rng);
  uint64_t chunk = input.blocks_per_chunk * sum;
  uint64_t chunks = 1 + rng() % 5000;
  switch (rng() % 3) {
    case 0: input.cpu_bytes = chunks * chunk; break;                          // exactly full
    case 1: input.cpu_bytes = (chunks + 1) * chunk - 1; break;                // one byte short of more
    default: input.cpu_bytes = chunks * chunk + rng() % chunk; break;        // anywhere between
  }
  return generated;
}

void check_plan(const Generated& generated, const CapacityPlan& plan) {
  const PlanInput& input = generated.input;
  uint64_t chunk = plan.chunk_bytes;
  REQUIRE(plan.chunk_count >= 1);
  CHECK(plan.payload_bytes <= input.cpu_bytes);
  CHECK(plan.payload_bytes + chunk > input.cpu_bytes);  // one more chunk would not fit
  CHECK(plan.chunk_count == input.cpu_bytes / chunk);

  REQUIRE(plan.ranks.size() == size_t{input.tp} * input.pp);
  uint64_t payload = 0;
  for (size_t i = 0; i < plan.ranks.size(); ++i) {
    const RankPlan& rank = plan.ranks[i];
    CHECK(rank.rank == i);
    CHECK(rank.tp_rank == i % input.tp);
    CHECK(rank.pp_rank == i / input.tp);
    CHECK(rank.payload_bytes_per_block == generated.stage_payloads[rank.pp_rank]);
    CHECK(rank.payload_bytes == plan.chunk_count * input.blocks_per_chunk * rank.payload_bytes_per_block);
    CHECK(rank.region_bytes >= rank.payload_bytes);
    CHECK(rank.region_bytes < rank.payload_bytes + plan.page_size);
    CHECK(rank.region_bytes % plan.page_size == 0);
    CHECK(rank.pages * plan.page_size == rank.region_bytes);
    uint64_t groups_sum = 0;
    for (const GroupPayload& group : rank.groups) groups_sum += group.bytes_per_block;
    CHECK(groups_sum == rank.payload_bytes_per_block);
    CHECK(rank.groups.size() == plan.groups.size());
    payload += rank.payload_bytes;
  }
  CHECK(payload == plan.payload_bytes);
  CHECK(plan.region_bytes - plan.rounding_bytes == plan.payload_bytes);
}

}  // namespace

TEST_CASE("generated TP x PP layouts: within budget, one more chunk would not fit, regions cover payloads") {
  Rng rng(20261129);
  size_t unequal = 0;
  for (uint32_t tp : {1u, 2u, 4u, 8u}) {
    for (uint32_t pp : {1u, 2u, 3u, 4u, 5u, 7u, 8u, 16u, 17u, 32u}) {
      for (int round = 0; round < 3; ++round) {
        Generated generated = generate(rng, tp, pp);
        CAPTURE(tp);
        CAPTURE(pp);
        CAPTURE(round);
        CapacityPlan plan = make_plan(generated.input, HostInfo{});
        check_plan(generated, plan);
        std::set<uint64_t> payloads(generated.stage_payloads.begin(), generated.stage_payloads.end());
        if (payloads.size() > 1) ++unequal;
      }
    }
  }
  CHECK(unequal == 4 * 9 * 3);  // every PP > 1 case had stages of different payloads
}

TEST_CASE("float budgets truncate toward zero, and the plan follows the truncated budget") {
  Rng rng(7);
  for (int i = 0; i < 2000; ++i) {
    // Doubles up to 2^60, most not integers: far above 2^53 they are, and are exact.
    double budget = std::ldexp(static_cast<double>(rng() >> 11) / 9007199254740992.0, static_cast<int>(rng() % 61));
    uint64_t payload = 1 + rng() % 100000;
    if (budget < static_cast<double>(payload)) budget += static_cast<double>(payload);
    char text[512];
    std::snprintf(text, sizeof text,
                  R"({"tp": 1, "pp": 1, "blocks_per_chunk": 1, "cpu_bytes": %.17g,
                      "ranks": [{"tp_rank": 0, "pp_rank": 0, "num_blocks": 1, "bytes_per_block": %)" PRIu64 "}]}",
                  budget, payload);
    CAPTURE(text);
    PlanInput input = parse_plan_input(text);
    CHECK(input.cpu_bytes == static_cast<uint64_t>(budget));
    CapacityPlan plan = make_plan(input, HostInfo{});
    CHECK(plan.chunk_count == static_cast<uint64_t>(budget) / payload);
    CHECK(plan.payload_bytes <= static_cast<uint64_t>(std::trunc(budget)));
  }
}

}  // namespace hugepin::planner
