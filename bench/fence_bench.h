// How fast the scheduler side of the offload protocol takes reports: copy-complete and
// compute-release reports applied per second on one core, for TP x PP ranks, against the way
// engines keep this state today (a hash map of job -> std::set of ranks, a std::map of chunk
// holds, the minimum over a vector of rank epochs on every release, a scan of the retired list).
//
// Both run the same engine loop on the same prebuilt report stream, one after the other in one
// thread: each step dispatches jobs (stores over free chunks, loads over cached ones), applies
// the previous step's reports ring by ring (every rank's copy-complete for each job, then its
// compute-release), evicts (retires) the oldest cached chunks, begins an epoch, and takes back
// the reusable chunks. The time covers all of it; the rate counts reports. Time is the CPU time
// of the calling thread (one core), so that other processes on a shared machine do not count.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/stats.h"

namespace hugepin::bench {

struct FenceBenchOptions {
  std::vector<uint32_t> rank_counts{2, 4, 8, 16, 32, 64, 128, 256};
  uint32_t jobs_per_step = 8;    // half stores, half loads
  uint32_t chunks_per_job = 4;
  uint32_t chunks = 4096;        // the plan's chunk count
  uint64_t reports = 2000000;    // reports per measured run
  unsigned repeat = 5;
  unsigned warmup = 1;
};

struct FenceBenchRow {
  uint32_t ranks = 0;
  uint64_t reports = 0;  // per run
  uint64_t steps = 0;
  Summary ours;          // reports per second
  Summary baseline;      // reports per second
};

// Throws Error naming the option when one is out of range (a rank count of 0 or above
// kMaxRanks, no jobs, too few chunks for the jobs in flight, no repeat).
void check_fence_bench_options(const FenceBenchOptions& options);

// Runs every rank count, alternating ours and the baseline `repeat` times after `warmup`
// unmeasured runs of each. Throws Error when an option is out of range, or when the two
// disagree on how many jobs completed or chunks came back (a bug in one of them). Calls
// `progress` before each run.
std::vector<FenceBenchRow> run_fence_bench(const FenceBenchOptions& options,
                                           const std::function<void(const std::string&)>& progress);

}  // namespace hugepin::bench
