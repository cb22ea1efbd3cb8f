// Reports between two processes: hugepin's ReportRing against Boost.Lockfree's spsc_queue, both
// built in the same kind of shared memory (one MAP_SHARED mapping inherited across fork), the same
// 32-byte Report, the same capacity and count, in the same run. The producer is a forked child,
// the consumer this process, each pinned to its own CPU when there are two.
//
// Throughput: the producer pushes `count` reports in batches as fast as it can; the consumer pops
// batches of the same size and checks every sequence number. Latency: a separate run at a paced
// rate (one report every `latency_interval_ns`, so the ring is mostly empty); the producer stamps
// CLOCK_MONOTONIC at the push, the consumer reads the clock on receipt. A last row has our
// consumer sleep on the ring's doorbell whenever the ring is empty (a quarter of `count`, and a
// latency run at a quarter of the rate): what sleeping instead of spinning costs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/os.h"
#include "bench/stats.h"

namespace hugepin::bench {

struct RingBenchOptions {
  uint64_t count = 5'000'000;                // reports per throughput run
  std::vector<uint32_t> batches{1, 32};      // batch sizes, push and pop alike
  uint64_t latency_samples = 100'000;
  uint64_t latency_interval_ns = 5'000;
  unsigned repeat = 3;                       // throughput runs per row (the median is reported)
};

// The capacity both queues have (Boost's is a compile-time parameter).
inline constexpr uint32_t kRingBenchCapacity = 4096;

struct RingBenchRow {
  std::string method;   // "hugepin ReportRing", "Boost.Lockfree spsc_queue", "hugepin ReportRing, consumer sleeps"
  bool ours = false;
  uint32_t batch = 0;
  Summary reports_per_second;
  // One-way latency of the paced run, in ns; measured with batch 1 (rows of larger batches: 0).
  double latency_p50_ns = 0;
  double latency_p99_ns = 0;
  double latency_max_ns = 0;
};

struct RingBenchResult {
  std::vector<RingBenchRow> rows;  // for each batch: ours, Boost; then ours with a sleeping consumer
  int producer_cpu = -1;           // -1: not pinned (one CPU)
  int consumer_cpu = -1;
};

// Runs every row; calls `progress` with a line before each measurement. Throws Error when a run
// fails (a fork, a lost or repeated report, the producer exiting badly).
RingBenchResult run_ring_bench(Os& os, const RingBenchOptions& options,
                               const std::function<void(const std::string&)>& progress);

}  // namespace hugepin::bench
