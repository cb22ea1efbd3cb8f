// The host engine on real memory: random data, poisoned destinations, every byte checked.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>

#include "base/error.h"
#include "base/pattern.h"
#include "dma/copy_engine.h"

namespace hugepin {

TEST_CASE("host engine copies every pair of every view, both directions, and nothing else") {
  const uint64_t blocks = 64;
  const std::vector<uint64_t> sizes{4096, 4096 * 3 + 16, 520};  // odd sizes are fine on the host
  uint64_t per_side = 0;
  for (uint64_t size : sizes) per_side += size * blocks;
  std::vector<std::byte> device(per_side), host(per_side);
  std::vector<SegmentView> views;
  std::vector<uint64_t> offsets;  // each view sits at the same offset in both buffers
  uint64_t offset = 0;
  for (uint64_t size : sizes) {
    views.push_back({reinterpret_cast<uintptr_t>(device.data() + offset), size, blocks, host.data() + offset, size,
                     blocks, size});
    offsets.push_back(offset);
    offset += size * blocks;
  }
  CopyEngineOptions options;
  options.host_threads = 3;
  auto engine = make_host_copy_engine(views, options);
  std::mt19937_64 random(11);
  for (Direction direction : {Direction::kHostToDevice, Direction::kDeviceToHost}) {
    CAPTURE(direction_name(direction));
    std::vector<std::byte>& source = direction == Direction::kHostToDevice ? host : device;
    std::vector<std::byte>& target = direction == Direction::kHostToDevice ? device : host;
    for (auto& byte : source) byte = static_cast<std::byte>(random());
    std::fill(target.begin(), target.end(), std::byte{0xA5});  // poison
    std::vector<BlockPair> pairs;
    for (uint64_t i = 0; i < 17; ++i) pairs.push_back({random() % blocks, i * 3});  // distinct destinations
    auto completion = engine->launch(direction, pairs);
    CHECK(completion->done());
    for (size_t v = 0; v < sizes.size(); ++v) {
      const uint64_t base = offsets[v];
      for (uint64_t block = 0; block < blocks; ++block) {
        const std::byte* got = target.data() + base + block * sizes[v];
        auto pair = std::find_if(pairs.begin(), pairs.end(), [&](const BlockPair& p) { return p.dst == block; });
        if (pair == pairs.end()) {
          CHECK(std::all_of(got, got + sizes[v], [](std::byte b) { return b == std::byte{0xA5}; }));
        } else {
          const std::byte* want = source.data() + base + pair->src * sizes[v];
          CHECK(std::equal(got, got + sizes[v], want));
        }
      }
    }
  }
}

TEST_CASE("host engine refuses GPU backends and bad pairs, copying nothing") {
  std::vector<std::byte> device(4096 * 4), host(4096 * 4, std::byte{1});
  std::vector<SegmentView> views{{reinterpret_cast<uintptr_t>(device.data()), 4096, 4, host.data(), 4096, 4, 4096}};
  auto engine = make_host_copy_engine(views, {});
  std::vector<BlockPair> pairs{{0, 0}, {1, 9}};
  CHECK_THROWS_WITH_AS(engine->launch(Direction::kHostToDevice, pairs), doctest::Contains("block pair 1 (1 -> 9)"), Error);
  CHECK(std::all_of(device.begin(), device.end(), [](std::byte b) { return b == std::byte{0}; }));
  CHECK_THROWS_WITH_AS(engine->launch(Direction::kHostToDevice, {}, CopyBackend::kSmBulk),
                       "the host copy engine has no sm-bulk backend", Error);
  CHECK(parse_backend("dma-batch") == CopyBackend::kDmaBatch);
  CHECK_THROWS_WITH_AS(parse_backend("fast"), doctest::Contains("unknown copy backend 'fast'"), Error);
}

TEST_CASE("host engine: a mark is reached as soon as it is made, when_reached calls at once, span() forgets it") {
  std::vector<std::byte> device(4096 * 4), host(4096 * 4);
  std::vector<SegmentView> views{{reinterpret_cast<uintptr_t>(device.data()), 4096, 4, host.data(), 4096, 4, 4096}};
  auto engine = make_host_copy_engine(views, {});
  const uint64_t start = engine->mark(Direction::kDeviceToHost, nullptr);
  const uint64_t end = engine->mark(Direction::kDeviceToHost, nullptr);
  CHECK(engine->reached(end));
  int calls = 0;
  auto count = [](void* context, int error) { *static_cast<int*>(context) += error == 0 ? 1 : 100; };
  engine->when_reached(end, count, &calls);
  CHECK(calls == 1);
  CHECK(engine->span(start, end).elapsed_ns >= 0);
  CHECK_THROWS_WITH_AS(engine->reached(end), doctest::Contains("no timing mark"), Error);
  CHECK_THROWS_WITH_AS(engine->when_reached(end, count, &calls), doctest::Contains("no timing mark"), Error);
  CHECK(calls == 1);  // not called for an unknown mark
}

}  // namespace hugepin
