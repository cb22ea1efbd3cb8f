// Parsing plan inputs: the documented example, defaults, float budgets, and one-line errors that
// name the JSON path and value for every malformed field.
#include "planner/plan_input.h"

#include <doctest/doctest.h>

#include <string>

#include "base/size.h"
#include "planner/test_support.h"

namespace hugepin::planner {
namespace {

// The issue's example: one rank by tensors, one by bytes per block.
constexpr const char* kExample = R"({
  "tp": 2, "pp": 1, "dp": 1, "pcp": 1, "dcp": 1,
  "blocks_per_chunk": 16,
  "cpu_bytes": 6.4e10,
  "page_size": "2M",
  "ranks": [
    { "tp_rank": 0, "pp_rank": 0, "gpu_pci": "17:00.0", "num_blocks": 4096,
      "tensors": [ { "name": "layers.0.attn", "shape": [2, 4096, 16, 8, 128],
                     "strides": [67108864, 16384, 1024, 128, 1], "element_size": 2,
                     "storage": "s0", "storage_bytes": 268435456, "group": 0 } ] },
    { "tp_rank": 1, "pp_rank": 0, "num_blocks": 4096, "bytes_per_block": 131072 } ] })";

// A minimal input with `field` (a JSON fragment "key": value) added to its top level.
std::string with_top(const std::string& field) {
  return R"({"tp": 1, "pp": 1, "blocks_per_chunk": 1, )" + field +
         R"(, "ranks": [{"tp_rank": 0, "pp_rank": 0, "num_blocks": 1, "bytes_per_block": 1}]})";
}

std::string with_budget(const std::string& value) { return with_top(R"("cpu_bytes": )" + value); }

// A minimal input whose one rank's one tensor has `fields` as its body.
std::string with_tensor(const std::string& fields) {
  return R"({"tp": 1, "pp": 1, "blocks_per_chunk": 1, "cpu_bytes": 1,
             "ranks": [{"tp_rank": 0, "pp_rank": 0, "num_blocks": 1, "tensors": [{)" + fields + "}]}]}";
}

constexpr const char* kTensor = R"("name": "t", "shape": [1, 8], "strides": [8, 1], "element_size": 2, "storage": "s")";

}  // namespace

TEST_CASE("the documented example parses, with its defaults") {
  PlanInput input = parse_plan_input(kExample);
  CHECK(input.tp == 2);
  CHECK(input.pp == 1);
  CHECK(input.blocks_per_chunk == 16);
  CHECK(input.cpu_bytes == 64000000000ull);
  CHECK(input.page_size == 2 * kMiB);
  REQUIRE(input.ranks.size() == 2);
  const RankInput& first = input.ranks[0];
  CHECK(first.gpu_pci == "0000:17:00.0");  // normalized
  CHECK(first.num_blocks == 4096);
  REQUIRE(first.tensors.size() == 1);
  CHECK(first.tensors[0].shape == std::vector<uint64_t>{2, 4096, 16, 8, 128});
  CHECK(first.tensors[0].strides == std::vector<uint64_t>{67108864, 16384, 1024, 128, 1});
  CHECK(first.tensors[0].storage_bytes == uint64_t{268435456});
  CHECK_FALSE(first.bytes_per_block.has_value());
  const RankInput& second = input.ranks[1];
  CHECK(second.gpu_pci.empty());
  CHECK(second.tensors.empty());
  CHECK(second.bytes_per_block == uint64_t{131072});

  PlanInput defaults = parse_plan_input(with_tensor(kTensor));
  CHECK(defaults.dp == 1);
  CHECK(defaults.page_size == 0);
  CHECK_FALSE(defaults.ranks[0].tensors[0].storage_bytes.has_value());
  CHECK(defaults.ranks[0].tensors[0].group == 0);
}

TEST_CASE("cpu_bytes: integers are exact, floats are truncated toward zero") {
  CHECK(parse_plan_input(with_budget("18446744073709551615")).cpu_bytes == UINT64_MAX);
  CHECK(parse_plan_input(with_budget("1000.9")).cpu_bytes == 1000);
  CHECK(parse_plan_input(with_budget("0.99")).cpu_bytes == 0);
  CHECK(parse_plan_input(with_budget("1e3")).cpu_bytes == 1000);
  CHECK(parse_plan_input(with_budget("6.4e10")).cpu_bytes == 64000000000ull);
  // The largest double below 2^64.
  CHECK(parse_plan_input(with_budget("18446744073709549568.0")).cpu_bytes == 18446744073709549568ull);

  CHECK_REJECTS(parse_plan_input(with_budget("-1")), "cpu_bytes = -1: negative");
  CHECK_REJECTS(parse_plan_input(with_budget("-0.5")), "cpu_bytes = -0.5: negative");
  // JSON has no NaN or infinity; a float too large for a double is refused by the parser itself.
  CHECK_REJECTS(parse_plan_input(with_budget("1e999")), "input is not valid JSON: [json.exception.out_of_range.406] number overflow parsing '1e999'");
  CHECK_REJECTS(parse_plan_input(with_budget("NaN")), "input is not valid JSON");
  CHECK_REJECTS(parse_plan_input(with_budget("18446744073709551616")), "cpu_bytes = 1.8446744073709552e+19: above 2^64-1");
  CHECK_REJECTS(parse_plan_input(with_budget("1.8446744073709552e19")), "above 2^64-1 bytes");
  CHECK_REJECTS(parse_plan_input(with_budget(R"("64G")")), R"(cpu_bytes = "64G": must be an integer)");
}

TEST_CASE("page_size accepts 4K, 2M, 1G in any size spelling") {
  CHECK(parse_plan_input(with_top(R"("cpu_bytes": 1, "page_size": "4K")")).page_size == 4 * kKiB);
  CHECK(parse_plan_input(with_top(R"("cpu_bytes": 1, "page_size": "1GiB")")).page_size == kGiB);
  CHECK_REJECTS(parse_plan_input(with_top(R"("cpu_bytes": 1, "page_size": "3M")")), R"(page_size = "3M": must be 4K, 2M or 1G)");
  CHECK_REJECTS(parse_plan_input(with_top(R"("cpu_bytes": 1, "page_size": 2097152)")), "page_size = 2097152: must be a string");
}

TEST_CASE("malformed JSON and fields are one-line errors naming the path and value") {
  CHECK_REJECTS(parse_plan_input("{"), "input is not valid JSON");
  CHECK_REJECTS(parse_plan_input(""), "input is not valid JSON");
  CHECK_REJECTS(parse_plan_input("[1, 2]"), "input = [1, 2]: must be a JSON object");
  CHECK_REJECTS(parse_plan_input(R"({"pp": 1})"), "tp: missing");
  CHECK_REJECTS(parse_plan_input(with_top(R"("cpu_bytes": 1, "tpp": 2)")), "tpp = 2: unknown field");
  CHECK_REJECTS(parse_plan_input(with_top(R"("cpu_bytes": 1, "dp": -2)")), "dp = -2: negative");
  CHECK_REJECTS(parse_plan_input(with_top(R"("cpu_bytes": 1, "dp": 4294967296)")), "dp = 4294967296: above the largest accepted value 4294967295");
  CHECK_REJECTS(parse_plan_input(with_top(R"("cpu_bytes": 1, "dp": 1.0)")), "dp = 1.0: must be an integer");
  CHECK_REJECTS(parse_plan_input(with_top(R"("cpu_bytes": 1, "dp": null)")), "dp = null: must be an integer");
  CHECK_REJECTS(parse_plan_input(R"({"tp": 1, "pp": 1, "blocks_per_chunk": 1, "cpu_bytes": 1, "ranks": {}})"),
                "ranks = an object of 0 fields: must be an array of ranks");
  CHECK_REJECTS(parse_plan_input(R"({"tp": 1, "pp": 1, "blocks_per_chunk": 1, "cpu_bytes": 1, "ranks": [7]})"),
                "ranks[0] = 7: must be a JSON object");
  CHECK_REJECTS(parse_plan_input(R"({"tp": 1, "pp": 1, "blocks_per_chunk": 1, "cpu_bytes": 1,
                                     "ranks": [{"tp_rank": 0, "pp_rank": 0, "num_blocks": 1, "bytes_per_blok": 8}]})"),
                "ranks[0].bytes_per_blok = 8: unknown field");
  CHECK_REJECTS(parse_plan_input(R"({"tp": 1, "pp": 1, "blocks_per_chunk": 1, "cpu_bytes": 1,
                                     "ranks": [{"tp_rank": 0, "pp_rank": 0, "num_blocks": 1, "gpu_pci": "GPU0"}]})"),
                R"(ranks[0].gpu_pci = "GPU0": )");
  CHECK_REJECTS(parse_plan_input(R"({"tp": 1, "pp": 1, "blocks_per_chunk": 1, "cpu_bytes": 1,
                                     "ranks": [{"tp_rank": 0, "num_blocks": 1}]})"),
                "ranks[0].pp_rank: missing");
}

TEST_CASE("tensor fields are checked one by one") {
  CHECK_REJECTS(parse_plan_input(with_tensor(R"("name": "t", "shape": [1, 8], "element_size": 2, "storage": "s")")),
                "ranks[0].tensors[0].strides: missing");
  CHECK_REJECTS(parse_plan_input(with_tensor(R"("name": "t", "shape": [1, -8], "strides": [8, 1], "element_size": 2, "storage": "s")")),
                "ranks[0].tensors[0].shape[1] = -8: negative");
  CHECK_REJECTS(parse_plan_input(with_tensor(R"("name": "t", "shape": [1, 8], "strides": "8,1", "element_size": 2, "storage": "s")")),
                R"(ranks[0].tensors[0].strides = "8,1": must be an array of integers)");
  CHECK_REJECTS(parse_plan_input(with_tensor(R"("name": "t", "shape": [1, 8], "strides": [8, 1], "element_size": 2, "storage": "")")),
                R"(ranks[0].tensors[0].storage = "": must not be empty)");
  CHECK_REJECTS(parse_plan_input(with_tensor(std::string(kTensor) + R"(, "group": 1.5)")),
                "ranks[0].tensors[0].group = 1.5: must be an integer");
  CHECK_REJECTS(parse_plan_input(with_tensor(std::string(kTensor) + R"(, "dtype": "bf16")")),
                R"(ranks[0].tensors[0].dtype = "bf16": unknown field)");
}

TEST_CASE("deeply nested or large values are described without recursion") {
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  CHECK_REJECTS(parse_plan_input(with_budget(deep)), "cpu_bytes = an array of 1 entries: must be an integer");
  std::string many = "[";
  for (int i = 0; i < 1000; ++i) many += (i ? "," : "") + std::to_string(i);
  many += "]";
  CHECK_REJECTS(parse_plan_input(with_budget(many)), "cpu_bytes = [0, 1, 2, 3, 4, 5, 6, 7, ... (1000 entries)]");
}

}  // namespace hugepin::planner
