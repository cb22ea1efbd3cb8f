// Reports between two processes: hugepin's ReportRing, the ring as it was before (the baseline in
// bench/baseline/report_ring_v1.h) and Boost.Lockfree's spsc_queue, all built in the same shared
// memory (one MAP_SHARED mapping inherited across fork, zeroed before each queue is built there),
// the same 32-byte Report, the same capacity and count, in the same run. The producer is a forked
// child, the consumer this process, each pinned to its own CPU: two CPUs of different cores where
// there are (SMT siblings share their caches, which would measure another machine).
//
// Throughput: the producer pushes `count` reports in batches as fast as it can; the consumer pops
// batches of the same size and checks every sequence number. Each repeat runs the three queues
// one after the other, starting with a different one each time, so that a drift of the machine
// hits all of them. Latency: a separate run at a paced rate (one report every
// `latency_interval_ns`, so the ring is mostly empty); the producer stamps CLOCK_MONOTONIC at the
// push, the consumer reads the clock on receipt. A last row has our consumer sleep on the ring's
// doorbell whenever the ring is empty (a quarter of `count`, and a latency run at a quarter of the
// rate): what sleeping instead of spinning costs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/os.h"
#include "bench/stats.h"

namespace hugepin::bench {

struct RingBenchOptions {
  uint64_t count = 10'000'000;               // reports per throughput run
  std::vector<uint32_t> batches{1, 32};      // batch sizes, push and pop alike
  uint64_t latency_samples = 100'000;
  uint64_t latency_interval_ns = 5'000;
  unsigned repeat = 5;                       // throughput runs per row (the median is reported)
  // {producer, consumer}; empty: chosen (two CPUs of different cores, where there are).
  std::vector<int> cpus;
};

// The capacity every queue has (Boost's is a compile-time parameter).
inline constexpr uint32_t kRingBenchCapacity = 4096;

enum class RingMethod { kOurs, kBaseline, kBoost };

struct RingBenchRow {
  std::string method;  // "hugepin ReportRing", "ReportRing v1 (baseline)", "Boost.Lockfree spsc_queue", ...
  RingMethod kind = RingMethod::kOurs;
  bool sleeping_consumer = false;
  uint32_t batch = 0;
  Summary reports_per_second;
  // One-way latency of the paced run, in ns; measured with batch 1 (rows of larger batches: 0).
  double latency_p50_ns = 0;
  double latency_p99_ns = 0;
  double latency_max_ns = 0;
  // The sleeping-consumer row: the producer's wake-up system calls per report over its throughput
  // runs (each found the consumer counted as a sleeper: asleep, or about to sleep); -1 in the
  // other rows. Its rate falls as this rises: a
  // consumer that empties the ring sooner sleeps more often, and each sleep costs the producer a
  // wake-up.
  double wakes_per_report = -1;
};

// Whether the producer's and the consumer's CPUs are on one core.
enum class CoreSharing { kDifferentCores, kSmtSiblings, kUnknown };
const char* core_sharing_name(CoreSharing sharing);  // "different cores", "SMT siblings", "cores unknown"

struct RingBenchResult {
  // For each batch: ours, the baseline, Boost; then ours with a sleeping consumer.
  std::vector<RingBenchRow> rows;
  int producer_cpu = -1;  // -1: not pinned (one CPU)
  int consumer_cpu = -1;
  CoreSharing core_sharing = CoreSharing::kUnknown;
  // Whether this process is registered for membarrier(2): if not, the baseline publishes each
  // index with a seq_cst store (ours does not use it: ipc/doorbell.h).
  bool membarrier_registered = false;
};

// Runs every row; calls `progress` with a line before each measurement. Throws Error when a run
// fails (a fork, a lost or repeated report, the producer exiting badly) or `options.cpus` names
// CPUs this process may not use.
RingBenchResult run_ring_bench(Os& os, const RingBenchOptions& options,
                               const std::function<void(const std::string&)>& progress);

// The (producer, consumer) CPUs among `allowed`: the consumer on the first CPU, the producer on
// the first after it on another core of the same package, else of any package, else (every
// allowed CPU on one core) its SMT sibling; {-1, -1} for fewer than two CPUs. `core_of(cpu)` names
// a CPU's core as {package, core}, {-1, -1} when unknown (then the next CPU, sharing unknown).
struct CpuPair {
  int producer = -1;
  int consumer = -1;
  CoreSharing sharing = CoreSharing::kUnknown;
};
CpuPair choose_ring_cpus(const std::vector<int>& allowed,
                         const std::function<std::pair<int, int>(int cpu)>& core_of);

}  // namespace hugepin::bench
