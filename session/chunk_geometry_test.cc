#include "session/chunk_geometry.h"

#include <doctest/doctest.h>

#include <cerrno>

#include "planner/plan_json.h"
#include "tests/support/error_text.h"

namespace hugepin {
namespace {

using test::contains;
using test::error_of;

// TP 2 x PP 1: rank 0 has two segments of 64 and 32 bytes per block, rank 1 one of 128.
ChunkGeometry two_ranks(uint64_t chunks = 10, uint64_t blocks_per_chunk = 4) {
  return ChunkGeometry(2, 1, chunks, blocks_per_chunk, {{64, 32}, {128}});
}

TEST_CASE("segments are laid out segment-major, each block packed") {
  ChunkGeometry g = two_ranks();
  CHECK(g.host_blocks() == 40);
  const RankGeometry& r0 = g.rank(0);
  REQUIRE(r0.segments.size() == 2);
  CHECK(r0.segments[0].host_offset == 0);
  CHECK(r0.segments[1].host_offset == 40 * 64);  // every block of segment 0 first
  CHECK(r0.segments[1].host_block_stride == 32);
  CHECK(r0.payload_bytes_per_block == 96);
  CHECK(r0.host_bytes == 40 * 96);
  CHECK(g.rank(1).host_bytes == 40 * 128);
  CHECK(g.rank(1).tp_rank == 1);
  CHECK(g.chunk_bytes(0) == 4 * 96);
  CHECK(g.chunk_segment_bytes(0, 1) == 4 * 32);
  CHECK(g.chunk_bytes_all_ranks() == 4 * (96 + 128));
  CHECK(g.host_block_offset(0, 1, 3, 2) == 40 * 64 + (3 * 4 + 2) * 32);
}

TEST_CASE("host blocks are checked against the chunk count and the blocks per chunk") {
  ChunkGeometry g = two_ranks();
  CHECK(g.host_block(9, 3) == 39);
  CHECK(contains(error_of([&] { g.host_block(10, 0); }), "chunk 10 is out of range (the arena has 10)"));
  CHECK(contains(error_of([&] { g.host_block(0, 4); }), "block 4 of a chunk is out of range (4 per chunk)"));
  try {
    g.host_block(10, 0);
  } catch (const Error& error) {
    CHECK(error.errno_value() == ERANGE);
  }
}

TEST_CASE("a chunk count that does not fit a 32-bit chunk id is refused, not truncated") {
  const std::string error = error_of([] { ChunkGeometry(1, 1, uint64_t{1} << 32, 1, {{64}}); });
  CHECK(contains(error, "chunk_count = 4294967296"));
  CHECK(contains(error, "chunk ids are 32-bit"));
  CHECK_NOTHROW(ChunkGeometry(1, 1, kMaxChunkCount, 1, {{64}}));
  CHECK(contains(error_of([] { ChunkGeometry(1, 1, 0, 1, {{64}}); }), "chunk_count = 0"));
}

TEST_CASE("malformed geometries are refused naming the value") {
  CHECK(contains(error_of([] { ChunkGeometry(2, 1, 4, 1, {{64}}); }), "tp 2 x pp 1 ranks, but 1 ranks described"));
  CHECK(contains(error_of([] { ChunkGeometry(1, 1, 4, 0, {{64}}); }), "blocks_per_chunk = 0"));
  CHECK(contains(error_of([] { ChunkGeometry(1, 1, 4, 1, {{}}); }), "rank 0 has no KV segment"));
  CHECK(contains(error_of([] { ChunkGeometry(1, 1, 4, 1, {{64, 0}}); }), "rank 0 segment 1: bytes_per_block = 0"));
  CHECK(contains(error_of([] { ChunkGeometry(1, 1, uint64_t{1} << 31, uint64_t{1} << 20, {{uint64_t{1} << 20}}); }),
                 "overflows 64 bits"));
}

TEST_CASE("a chunk's pairs follow the direction: a store copies device blocks to host blocks") {
  ChunkGeometry g = two_ranks();
  std::vector<BlockPair> pairs;
  g.append_chunk_pairs(Direction::kDeviceToHost, 2, 100, &pairs);
  REQUIRE(pairs.size() == 4);
  CHECK(pairs[0].src == 100);
  CHECK(pairs[0].dst == 8);
  CHECK(pairs[3].src == 103);
  CHECK(pairs[3].dst == 11);
  pairs.clear();
  g.append_chunk_pairs(Direction::kHostToDevice, 2, 100, &pairs);
  CHECK(pairs[1].src == 9);
  CHECK(pairs[1].dst == 101);

  pairs.clear();
  const std::vector<ChunkId> chunks{1, 3};
  const std::vector<uint64_t> gpu{7, 6, 5, 4, 3, 2, 1, 0};
  g.append_job_pairs(Direction::kDeviceToHost, chunks, gpu, &pairs);
  REQUIRE(pairs.size() == 8);
  CHECK(pairs[0].src == 7);
  CHECK(pairs[0].dst == 4);
  CHECK(pairs[4].src == 3);
  CHECK(pairs[4].dst == 12);
  CHECK(contains(error_of([&] { g.append_job_pairs(Direction::kDeviceToHost, chunks, std::vector<uint64_t>(7), &pairs); }),
                 "7 device blocks for 2 chunks of 4 blocks: need 8"));
}

TEST_CASE("device segments must match the arena's segments") {
  ChunkGeometry g = two_ranks();
  std::vector<std::byte> host(g.rank(0).host_bytes);
  const std::vector<DeviceSegment> ok{{0x1000, 64, 16, 64}, {0x9000, 48, 16, 32}};
  std::vector<SegmentView> views = g.segment_views(0, host.data(), ok);
  REQUIRE(views.size() == 2);
  CHECK(views[1].host_base == host.data() + 40 * 64);
  CHECK(views[1].device_block_stride == 48);
  CHECK(views[1].host_blocks == 40);
  CHECK(contains(error_of([&] { g.segment_views(0, host.data(), std::vector<DeviceSegment>{ok[0]}); }),
                 "rank 0 has 2 KV segments in the arena; 1 device segments given"));
  const std::vector<DeviceSegment> wrong_size{{0x1000, 64, 16, 64}, {0x9000, 64, 16, 64}};
  CHECK(contains(error_of([&] { g.segment_views(0, host.data(), wrong_size); }),
                 "device segment 1: bytes_per_block = 64, but the arena holds 32"));
  const std::vector<DeviceSegment> short_stride{{0x1000, 32, 16, 64}, {0x9000, 32, 16, 32}};
  CHECK(contains(error_of([&] { g.segment_views(0, host.data(), short_stride); }), "device segment 0"));
}

TEST_CASE("the geometry read back from an arena's plan text is the plan's") {
  ArenaLayout layout;
  layout.tp = 2;
  layout.pp = 1;
  layout.blocks_per_chunk = 4;
  layout.chunk_count = 10;
  layout.ranks = {{0, 0, 96, 40 * 96, -1}, {1, 0, 128, 40 * 128, -1}};
  layout.plan_json = R"({"ranks": [
      {"rank": 0, "storages": [{"segments": 1, "segment_bytes_per_block": 64},
                               {"segments": 1, "segment_bytes_per_block": 32}]},
      {"rank": 1, "storages": [{"segments": 2, "segment_bytes_per_block": 64}]}]})";
  ChunkGeometry g = ChunkGeometry::of_layout(layout);
  CHECK(g.rank(0).segments.size() == 2);
  CHECK(g.rank(1).segments.size() == 2);
  CHECK(g.rank(1).segments[1].host_offset == 40 * 64);

  layout.plan_json.clear();  // a --size arena: one segment of the payload
  CHECK(ChunkGeometry::of_layout(layout).rank(1).segments.size() == 1);

  layout.plan_json = R"({"ranks": [{"rank": 0, "storages": [{"segments": 1, "segment_bytes_per_block": 64}]}]})";
  CHECK(contains(error_of([&] { ChunkGeometry::of_layout(layout); }),
                 "rank 0: the arena's plan gives 64 bytes per block, its record 96"));
  layout.plan_json = "{not json";
  CHECK(contains(error_of([&] { ChunkGeometry::of_layout(layout); }), "not a plan"));
}

}  // namespace
}  // namespace hugepin
