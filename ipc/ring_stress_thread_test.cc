// Ring stress across threads: the process test's harness with std::thread producers, so that
// ThreadSanitizer (-DHUGEPIN_TSAN=ON) sees both sides of every ring.
#include <doctest/doctest.h>

#include <cstdlib>
#include <thread>

#include "ipc/ring_stress.h"

namespace hugepin {
namespace {

void run_stress_in_threads(const test::StressConfig& config) {
  const size_t bytes = test::stress_area_bytes(config);
  const size_t rounded = (bytes + kCacheLinePair - 1) / kCacheLinePair * kCacheLinePair;
  void* memory = std::aligned_alloc(kCacheLinePair, rounded);
  REQUIRE(memory != nullptr);
  test::StressArea area = test::build_stress_area(memory, config);
  std::vector<std::thread> producers;
  for (uint32_t r = 0; r < config.rings; ++r) {
    producers.emplace_back([&area, &config, r] { test::run_producer(real_os(), area, r, config); });
  }
  test::StressResult result = test::run_consumer(real_os(), area, config);
  for (std::thread& producer : producers) producer.join();
  CHECK_MESSAGE(result.bad_records == 0, result.first_error);
  for (uint32_t r = 0; r < config.rings; ++r) {
    CHECK(result.received[r] == config.records_per_ring);
    CHECK(area.sent[r] == config.records_per_ring);
    CHECK(area.rings[r]->produced() == config.records_per_ring);
    CHECK(area.rings[r]->consumed() == config.records_per_ring);
  }
  std::free(memory);
}

}  // namespace

TEST_CASE("three producer threads, rings of 64: every record arrives once, in order") {
  test::StressConfig config;
  config.rings = 3;
  config.capacity = 64;
  config.records_per_ring = 100'000;
  for (uint64_t seed : {11, 12}) {
    CAPTURE(seed);
    config.seed = seed;
    run_stress_in_threads(config);
  }
}

TEST_CASE("two producer threads, rings of 2 records") {
  test::StressConfig config;
  config.rings = 2;
  config.capacity = 2;
  config.records_per_ring = 20'000;
  config.seed = 13;
  run_stress_in_threads(config);
}

}  // namespace hugepin
