// The ring benchmark's pieces that decide what it measures: which CPUs it runs on, and that the
// baseline ring it compares with still moves records (the benchmark itself runs in cli_test).
#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <vector>

#include "bench/baseline/report_ring_v1.h"
#include "bench/ring_bench.h"

namespace hugepin::bench {
namespace {

using Topology = std::map<int, std::pair<int, int>>;  // cpu -> {package, core}

CpuPair choose(const std::vector<int>& allowed, const Topology& topology) {
  return choose_ring_cpus(allowed, [&topology](int cpu) {
    auto it = topology.find(cpu);
    return it == topology.end() ? std::pair{-1, -1} : it->second;
  });
}

}  // namespace

TEST_CASE("the ring benchmark runs on two cores, not on SMT siblings, where it can") {
  // Linux's usual numbering: cpu N and cpu N + 2 are siblings on a 2-core, 4-thread package.
  const Topology smt = {{0, {0, 0}}, {1, {0, 1}}, {2, {0, 0}}, {3, {0, 1}}};
  CpuPair pair = choose({0, 1, 2, 3}, smt);
  CHECK(pair.consumer == 0);
  CHECK(pair.producer == 1);
  CHECK(pair.sharing == CoreSharing::kDifferentCores);
  // Siblings numbered next to each other (cpu 0 and 1 on core 0).
  const Topology adjacent = {{0, {0, 0}}, {1, {0, 0}}, {2, {0, 1}}, {3, {0, 1}}};
  pair = choose({0, 1, 2, 3}, adjacent);
  CHECK(pair.producer == 2);
  CHECK(pair.sharing == CoreSharing::kDifferentCores);
  // A core of the same package before one of another package.
  const Topology packages = {{0, {0, 0}}, {1, {1, 0}}, {2, {0, 1}}};
  CHECK(choose({0, 1, 2}, packages).producer == 2);
  CHECK(choose({0, 1}, packages).producer == 1);
}

TEST_CASE("the ring benchmark says when it has only siblings, or cannot tell") {
  const Topology one_core = {{4, {0, 3}}, {5, {0, 3}}};
  CpuPair pair = choose({4, 5}, one_core);
  CHECK(pair.consumer == 4);
  CHECK(pair.producer == 5);
  CHECK(pair.sharing == CoreSharing::kSmtSiblings);
  pair = choose({0, 1}, {});
  CHECK(pair.producer == 1);
  CHECK(pair.sharing == CoreSharing::kUnknown);
  pair = choose({7}, one_core);
  CHECK(pair.producer == -1);
  CHECK(pair.consumer == -1);
  CHECK(std::string(core_sharing_name(CoreSharing::kSmtSiblings)) == "SMT siblings");
}

TEST_CASE("the baseline ring moves records in order, stops at full and at empty") {
  const uint32_t capacity = 8;
  const size_t bytes = baseline::ReportRingV1::memsize(capacity);
  REQUIRE(bytes > 0);
  void* memory = std::aligned_alloc(kCacheLinePair, bytes);
  auto* ring = baseline::ReportRingV1::init(memory, capacity);
  std::vector<Report> in(12);
  for (uint64_t i = 0; i < in.size(); ++i) in[i] = Report{ReportKind::kCopyComplete, 1, 0, i + 1, i * 7, 0};
  Report out[12];
  CHECK(ring->pop_batch(real_os(), out, 12) == 0);
  CHECK(ring->push_batch(real_os(), in.data(), 12) == capacity);
  CHECK(ring->pop_batch(real_os(), out, 5) == 5);
  CHECK(ring->push_batch(real_os(), in.data() + capacity, 4) == 4);  // across the end of the slots
  CHECK(ring->pop_batch(real_os(), out + 5, 12) == 7);
  for (uint64_t i = 0; i < in.size(); ++i) CHECK(out[i].sequence == i + 1);
  std::free(memory);
}

}  // namespace hugepin::bench
