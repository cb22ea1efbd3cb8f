// How copies are cut for each backend: DMA spans (runs merged, chunk edges respected) and the
// SM kernels' units (every byte exactly once), checked by walking them on the host.
#include "dma/copy_plan.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "base/error.h"
#include "dma/copy_engine.h"

namespace hugepin {
namespace {

SegmentView contiguous_view(uint64_t device_base, std::byte* host_base, uint64_t block_bytes, uint64_t blocks) {
  return {device_base, block_bytes, blocks, host_base, block_bytes, blocks, block_bytes};
}

std::byte* host_at(uint64_t address) { return reinterpret_cast<std::byte*>(address); }

}  // namespace

TEST_CASE("consecutive pairs merge into one span per run") {
  SegmentView view = contiguous_view(0x10000000, host_at(0x70000000), 4096, 100);
  std::vector<BlockPair> pairs{{10, 20}, {11, 21}, {12, 22}, {40, 23}, {41, 24}, {5, 5}};
  std::vector<CopySpan> spans = plan_dma_spans({&view, 1}, pairs, Direction::kDeviceToHost);
  REQUIRE(spans.size() == 3);
  CHECK(spans[0].src == 0x10000000 + 10 * 4096);
  CHECK(spans[0].dst == 0x70000000 + 20 * 4096);
  CHECK(spans[0].bytes == 3 * 4096);
  CHECK(spans[1].bytes == 2 * 4096);
  CHECK(spans[2].bytes == 4096);
  CHECK(plan_dma_spans({&view, 1}, pairs, Direction::kDeviceToHost, 0, 0, /*merge=*/false).size() == 6);
}

TEST_CASE("blocks that do not touch do not merge") {
  SegmentView view = contiguous_view(0x10000000, host_at(0x70000000), 4096, 100);
  view.host_block_stride = 8192;  // a padded host layout
  view.host_blocks = 50;
  std::vector<BlockPair> pairs{{1, 1}, {2, 2}};
  CHECK(plan_dma_spans({&view, 1}, pairs, Direction::kHostToDevice).size() == 2);
}

TEST_CASE("a run is cut where the host side crosses a pinned chunk") {
  SegmentView view = contiguous_view(0x10000000, host_at(0x70000000), 1 << 20, 64);
  std::vector<BlockPair> pairs;
  for (uint64_t b = 0; b < 8; ++b) pairs.push_back({b + 2, b + 2});  // host blocks 2..9 = 2 MiB..10 MiB
  std::vector<CopySpan> spans = plan_dma_spans({&view, 1}, pairs, Direction::kHostToDevice, 0x70000000, 4 << 20);
  REQUIRE(spans.size() == 3);  // [2,4) [4,8) [8,10) MiB
  CHECK(spans[0].bytes == 2u << 20);
  CHECK(spans[1].bytes == 4u << 20);
  CHECK(spans[2].bytes == 2u << 20);
  CHECK(spans[1].src == 0x70000000 + (4u << 20));
}

TEST_CASE("SM units move exactly the bytes the DMA spans move") {
  // Walks the units on the host the way the kernels do and compares the result with the spans,
  // over random views (several block sizes) and pairs with distinct destinations.
  std::mt19937_64 random(7);
  for (int trial = 0; trial < 50; ++trial) {
    CAPTURE(trial);
    const uint64_t piece = 16 * (1 + random() % 64);
    const uint64_t blocks = 16;
    const int view_count = 1 + static_cast<int>(random() % 5);
    std::vector<uint64_t> block_bytes;
    uint64_t per_side = 0;
    for (int v = 0; v < view_count; ++v) {
      block_bytes.push_back(16 * (1 + random() % 300));
      per_side += block_bytes.back() * blocks;
    }
    std::vector<std::byte> device(per_side), host(per_side), by_units, by_spans;
    for (auto& byte : device) byte = static_cast<std::byte>(random());
    for (auto& byte : host) byte = static_cast<std::byte>(random());
    std::vector<SegmentView> views;
    uint64_t offset = 0;
    for (uint64_t bytes : block_bytes) {
      views.push_back(contiguous_view(reinterpret_cast<uintptr_t>(device.data() + offset), host.data() + offset, bytes,
                                      blocks));
      offset += bytes * blocks;
    }
    std::vector<uint64_t> destinations(blocks);
    for (uint64_t i = 0; i < blocks; ++i) destinations[i] = i;
    std::shuffle(destinations.begin(), destinations.end(), random);
    std::vector<BlockPair> pairs;
    for (uint64_t i = 0; i < 1 + random() % blocks; ++i) pairs.push_back({random() % blocks, destinations[i]});
    const Direction direction = trial % 2 == 0 ? Direction::kHostToDevice : Direction::kDeviceToHost;
    std::vector<std::byte>& destination = direction == Direction::kHostToDevice ? device : host;
    const std::vector<std::byte> before = destination;

    UnitLayout layout{};
    std::vector<UnitView> units = plan_unit_views(views, direction, piece, &layout.pieces_per_pair);
    layout.view_count = static_cast<uint32_t>(units.size());
    layout.piece_bytes = piece;
    layout.pair_count = pairs.size();
    uint64_t total = 0;
    for (uint64_t u = 0; u < layout.unit_count(); ++u) {
      CopyUnit unit = copy_unit_at(layout, units.data(), reinterpret_cast<const UnitPair*>(pairs.data()), u);
      CHECK(unit.bytes > 0);
      CHECK(unit.bytes <= piece);
      CHECK(unit.bytes % 16 == 0);
      std::memcpy(reinterpret_cast<void*>(unit.dst), reinterpret_cast<const void*>(unit.src), unit.bytes);
      total += unit.bytes;
    }
    CHECK(total == copy_request_bytes(views, pairs));
    by_units = destination;

    destination = before;
    for (const CopySpan& span : plan_dma_spans(views, pairs, direction)) {
      std::memcpy(reinterpret_cast<void*>(span.dst), reinterpret_cast<const void*>(span.src), span.bytes);
    }
    by_spans = destination;
    CHECK(by_units == by_spans);
    CHECK(by_units != before);
  }
}

TEST_CASE("carried launches are cut into even kernels of at most 240 pairs, none empty, none over the slice") {
  // Every count up to 4 x the default carried limit, slices from one pair to more than a kernel
  // may carry, and no slice (per_kernel = count, as the engine passes it).
  for (uint64_t count = 1; count <= 4 * CopyEngineOptions().sm_carried_pairs_max; ++count) {
    for (uint64_t per_kernel : {uint64_t{1}, uint64_t{2}, uint64_t{7}, uint64_t{64}, uint64_t{239}, uint64_t{240},
                                uint64_t{241}, uint64_t{1000}, count}) {
      const uint64_t kernels = carried_kernels(count, per_kernel);
      const uint64_t limit = std::min<uint64_t>(per_kernel, kInlinePairs);
      uint64_t smallest = UINT64_MAX, largest = 0;
      REQUIRE(carried_share_first(count, kernels, 0) == 0);
      for (uint64_t k = 0; k < kernels; ++k) {
        const uint64_t share = carried_share_first(count, kernels, k + 1) - carried_share_first(count, kernels, k);
        smallest = std::min(smallest, share);
        largest = std::max(largest, share);
      }
      CAPTURE(count);
      CAPTURE(per_kernel);
      REQUIRE(carried_share_first(count, kernels, kernels) == count);  // every pair, once
      REQUIRE(smallest >= 1);
      REQUIRE(largest <= limit);
      REQUIRE(largest - smallest <= 1);                        // even
      REQUIRE(kernels == (count + limit - 1) / limit);         // no more kernels than needed
    }
  }
  CHECK(carried_kernels(256, 256) == 2);  // two of 128, not 240 and 16
  CHECK(carried_share_first(256, 2, 1) == 128);
}

TEST_CASE("requests are checked: ranges, sizes and alignment") {
  alignas(16) static std::byte host[4096 * 4];
  SegmentView view = contiguous_view(0x10000000, host, 4096, 4);
  std::vector<BlockPair> bad{{0, 4}};
  CHECK_THROWS_WITH_AS(check_copy_request({&view, 1}, bad, Direction::kHostToDevice, 1),
                       doctest::Contains("block pair 0 (0 -> 4) is out of range for segment view 0"), Error);
  // The first bad pair is named, in the view that refuses it (a second view with fewer blocks).
  alignas(16) static std::byte host2[4096 * 2];
  std::vector<SegmentView> two{view, contiguous_view(0x20000000, host2, 4096, 2)};
  std::vector<BlockPair> later{{0, 1}, {3, 0}, {1, 3}};
  CHECK_THROWS_WITH_AS(check_copy_request(two, later, Direction::kDeviceToHost, 1),
                       doctest::Contains("block pair 1 (3 -> 0) is out of range for segment view 1 (d2h: 2 source "
                                         "blocks, 2 destination blocks)"),
                       Error);
  std::vector<BlockPair> fits{{1, 0}, {0, 1}};
  CHECK_NOTHROW(check_copy_request(two, fits, Direction::kDeviceToHost, 1));
  SegmentView odd = view;
  odd.block_bytes = 4095;
  odd.device_block_stride = 4095;
  odd.host_block_stride = 4095;
  std::vector<BlockPair> ok{{1, 2}};
  CHECK_NOTHROW(check_copy_request({&odd, 1}, ok, Direction::kHostToDevice, 1));
  CHECK_THROWS_WITH_AS(check_copy_request({&odd, 1}, ok, Direction::kHostToDevice, 16),
                       doctest::Contains("is not a multiple of 16 bytes"), Error);
  SegmentView too_big = view;
  too_big.block_bytes = 8192;
  CHECK_THROWS_WITH_AS(check_copy_request({&too_big, 1}, ok, Direction::kDeviceToHost, 1),
                       doctest::Contains("exceeds its block stride"), Error);
  CHECK_THROWS_AS(check_copy_request({}, ok, Direction::kDeviceToHost, 1), Error);
}

}  // namespace hugepin
