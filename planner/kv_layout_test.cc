// Per-rank payload per block from KV tensor descriptors: the layouts attention backends use, shared
// storages, hybrid layers with different pages, and every layout the split must refuse.
#include "planner/kv_layout.h"

#include <doctest/doctest.h>

#include "planner/test_support.h"

namespace hugepin::planner {
namespace {

using test::blocks_outer;
using test::contiguous;
using test::kv_outer;
using test::state;

constexpr uint64_t kBlocks = 4096;

TensorDescriptor with_strides(TensorDescriptor tensor, std::vector<uint64_t> strides,
                              std::optional<uint64_t> storage_bytes) {
  tensor.strides = std::move(strides);
  tensor.storage_bytes = storage_bytes;
  return tensor;
}

}  // namespace

TEST_CASE("FlashAttention (2, num_blocks, ...): K and V are two segments of one storage") {
  // The example: 16 tokens x 8 heads x 128 dims x 2 bytes per block, for K and for V.
  TensorDescriptor tensor;
  tensor.name = "layers.0.attn";
  tensor.shape = {2, 4096, 16, 8, 128};
  tensor.strides = {67108864, 16384, 1024, 128, 1};
  tensor.element_size = 2;
  tensor.storage = "s0";
  tensor.storage_bytes = 268435456;
  StorageLayout layout = split_storage(tensor, 268435456, kBlocks, "t");
  CHECK(layout.page_bytes == 65536);
  CHECK(layout.outer_dim == 0);
  CHECK(layout.segments == 2);
  CHECK(layout.segment_bytes_per_block == 32768);
  CHECK(layout.bytes_per_block == 65536);
  CHECK(tensor_extent_bytes(tensor, "t") == 268435456);
  CHECK(tensor_extent_bytes(kv_outer("a", "s", kBlocks, 16, 8, 128, 2), "t") == 268435456);
}

TEST_CASE("block-major layouts are one segment of the whole page") {
  RankLayout flashinfer = rank_layout({blocks_outer("l0", "s0", kBlocks, 16, 8, 128, 2)}, kBlocks, "ranks[0]");
  REQUIRE(flashinfer.storages.size() == 1);
  CHECK(flashinfer.storages[0].outer_dim == -1);
  CHECK(flashinfer.storages[0].segments == 1);
  CHECK(flashinfer.bytes_per_block == 65536);

  // MLA: (num_blocks, block_size, latent) of 576 bf16 per token.
  RankLayout mla = rank_layout({contiguous("mla", "m", {kBlocks, 64, 576}, 2)}, kBlocks, "ranks[0]");
  CHECK(mla.bytes_per_block == 64 * 576 * 2);
}

TEST_CASE("a block-major layout with permuted dimensions splits as its memory lies") {
  // Logical (block_size, num_blocks, head_dim) over memory laid out (num_blocks, block_size, head_dim).
  TensorDescriptor tensor = contiguous("p", "s", {16, 64, 128}, 2);
  tensor.strides = {128, 16 * 128, 1};
  RankLayout layout = rank_layout({tensor}, 64, "ranks[0]");
  CHECK(layout.bytes_per_block == 16 * 128 * 2);
  CHECK(layout.storages[0].outer_dim == -1);
}

TEST_CASE("tensors sharing a storage count once, through the first tensor naming it") {
  std::vector<TensorDescriptor> tensors{kv_outer("l0", "s0", kBlocks, 16, 8, 128, 2),
                                        kv_outer("l1", "s0", kBlocks, 16, 8, 128, 2),
                                        kv_outer("l2", "s1", kBlocks, 16, 8, 128, 2)};
  RankLayout layout = rank_layout(tensors, kBlocks, "ranks[0]");
  REQUIRE(layout.storages.size() == 2);
  CHECK(layout.storages[0].storage == "s0");
  CHECK(layout.storages[0].tensor == "l0");
  CHECK(layout.storages[1].tensor == "l2");
  CHECK(layout.storages[1].tensor_index == 2);
  CHECK(layout.bytes_per_block == 2 * 65536);
}

TEST_CASE("hybrid attention and state layers with different pages add up") {
  constexpr uint64_t kStatePage = 262144;  // conv 24 KiB + SSM 128 KiB, padded to 256 KiB
  std::vector<TensorDescriptor> tensors{
      kv_outer("attn.0", "a0", kBlocks, 16, 8, 128, 2, 0),
      state("mamba.0.conv", "m0", kBlocks, {3, 4096}, kStatePage, 2, 1),
      state("mamba.0.ssm", "m0", kBlocks, {32, 64, 16}, kStatePage, 4, 1),
  };
  RankLayout layout = rank_layout(tensors, kBlocks, "ranks[0]");
  REQUIRE(layout.storages.size() == 2);
  CHECK(layout.storages[0].bytes_per_block == 65536);
  CHECK(layout.storages[0].segments == 2);
  CHECK(layout.storages[1].bytes_per_block == kStatePage);
  CHECK(layout.storages[1].segments == 1);
  CHECK(layout.storages[1].group == 1);
  CHECK(layout.bytes_per_block == 65536 + kStatePage);
}

TEST_CASE("a storage without a declared size is the largest extent naming it") {
  // K and V of one layer as two views into one block-major storage: (64, 512) whole, and its K
  // half (64, 256) striding over whole 1024-byte pages.
  TensorDescriptor whole = contiguous("kv", "s", {64, 512}, 2);
  TensorDescriptor k_half = with_strides(contiguous("k", "s", {64, 256}, 2), {512, 1}, std::nullopt);
  RankLayout layout = rank_layout({whole, k_half}, 64, "ranks[0]");
  CHECK(layout.storages[0].storage_bytes == 64 * 512 * 2);
  CHECK(layout.bytes_per_block == 1024);
  layout = rank_layout({k_half, whole}, 64, "ranks[0]");
  CHECK(layout.storages[0].tensor == "k");
  CHECK(layout.bytes_per_block == 1024);

  // A packed K half (256 bf16 per block, 512 bytes apart) represents the storage: its blocks do
  // not cover the 1024-byte pages one by one, so the split is refused.
  TensorDescriptor packed = contiguous("k", "s", {64, 256}, 2);
  CHECK_REJECTS(rank_layout({packed, whole}, 64, "ranks[0]"),
                "ranks[0].tensors[0].strides = [256, 1]: no dimension of size num_blocks 64 strides by 1024 bytes");
}

TEST_CASE("one block: strides of size-1 dimensions do not matter") {
  RankLayout layout = rank_layout({kv_outer("l", "s", 1, 16, 8, 128, 2)}, 1, "ranks[0]");
  CHECK(layout.bytes_per_block == 65536);
}

TEST_CASE("layouts that are not a block-major split are refused, naming the field and value") {
  // Two dimensions stride past a block: (2, 2, num_blocks, ...) interleaves layers and blocks.
  CHECK_REJECTS(rank_layout({contiguous("x", "s", {2, 2, 64, 128}, 2)}, 64, "ranks[1]"),
                "ranks[1].tensors[0].strides = [");
  CHECK_REJECTS(rank_layout({contiguous("x", "s", {2, 2, 64, 128}, 2)}, 64, "ranks[1]"),
                "only one outer K/V dimension");

  // A segment stride of 33 bytes cannot hold 4 blocks.
  CHECK_REJECTS(rank_layout({with_strides(contiguous("x", "s", {2, 4, 8}, 1), {33, 8, 1}, 68)}, 4, "ranks[0]"),
                "segment stride of dimension 0 (33 bytes) is not a whole number of blocks");

  // Two segments of 2*64*8 bytes each in a storage of 3*64*8 bytes.
  CHECK_REJECTS(rank_layout({with_strides(contiguous("x", "s", {2, 64, 8}, 1), {1024, 8, 1}, std::nullopt)}, 64,
                            "ranks[0]"),
                "2 segments of 1024 bytes overrun storage 's' of 1536 bytes");

  // The tensor is half of its storage: blocks stride 128 bytes through 256-byte pages, so the
  // worker's [num_blocks, 256] view would mix blocks (a strided state-only partition).
  CHECK_REJECTS(rank_layout({with_strides(contiguous("x", "s", {64, 128}, 1), {128, 1}, 64 * 256)}, 64, "ranks[0]"),
                "no dimension of size num_blocks 64 strides by 256 bytes");

  // Blocks 3 bytes apart, each 4 bytes long.
  CHECK_REJECTS(rank_layout({with_strides(contiguous("x", "s", {2, 4, 4}, 1), {12, 3, 1}, 28)}, 4, "ranks[0]"),
                "one block spans 4 bytes, more than its 3-byte slot");
}

TEST_CASE("malformed tensors are refused, naming the field and value") {
  TensorDescriptor good = contiguous("x", "s", {64, 128}, 2);
  TensorDescriptor tensor = good;

  tensor.storage_bytes = 64 * 256 + 3;
  CHECK_REJECTS(rank_layout({tensor}, 64, "ranks[2]"),
                "ranks[2].tensors[0].storage_bytes = 16387: storage 's' is not a whole number of blocks");
  tensor.storage_bytes = 1000;
  CHECK_REJECTS(rank_layout({tensor}, 64, "ranks[2]"), "ranks[2].tensors[0].storage_bytes = 1000: tensor 'x' addresses 16384 bytes");

  tensor = good;
  tensor.strides = {128};
  CHECK_REJECTS(rank_layout({tensor}, 64, "ranks[0]"), "ranks[0].tensors[0].strides = [128]: has 1 entries, shape [64, 128] has 2");
  tensor = good;
  tensor.shape = {64, 0};
  CHECK_REJECTS(rank_layout({tensor}, 64, "ranks[0]"), "ranks[0].tensors[0].shape = [64, 0]: dimension 1 is 0");
  tensor = good;
  tensor.element_size = 0;
  CHECK_REJECTS(rank_layout({tensor}, 64, "ranks[0]"), "ranks[0].tensors[0].element_size = 0");
  CHECK_REJECTS(rank_layout({good}, 0, "ranks[0]"), "num_blocks is 0");
  CHECK_REJECTS(rank_layout({}, 64, "ranks[5]"), "ranks[5].tensors = []: a rank without KV tensors");

  TensorDescriptor other = good;
  good.storage_bytes = 64 * 256;
  other.storage_bytes = 64 * 512;
  CHECK_REJECTS(rank_layout({good, other}, 64, "ranks[0]"),
                "ranks[0].tensors[1].storage_bytes = 32768: ranks[0].tensors[0] gives 16384 for the same storage 's'");
}

TEST_CASE("sizes that overflow 64 bits are refused") {
  TensorDescriptor huge = contiguous("x", "s", {uint64_t{1} << 40, uint64_t{1} << 40}, 2);
  CHECK_REJECTS(rank_layout({huge}, 64, "ranks[0]"), "overflows 64 bits");
  TensorDescriptor wide = contiguous("x", "s", {64, 128}, 2);
  wide.strides = {128, uint64_t{1} << 63};
  wide.shape = {64, 1};  // a size-1 dimension's stride is free, but still has to be a byte count
  CHECK_REJECTS(rank_layout({wide}, 64, "ranks[0]"), "ranks[0].tensors[0].strides[1] * element_size");
}

}  // namespace hugepin::planner
