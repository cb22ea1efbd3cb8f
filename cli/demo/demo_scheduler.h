// The scheduler side of `hugepin demo`: creates the arena from the plan, starts one process per
// rank, drives copy pins, quorum and fence over the rings for a while, stops the workers, checks
// every byte of the host KV, and removes the arena.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/demo/demo_config.h"
#include "hugemem/arena.h"
#include "protocol/offload_scheduler.h"

namespace hugepin::demo {

struct DemoResult {
  std::string arena;
  bool gpu = false;
  ArenaReport arena_report;
  uint64_t chunk_count = 0;
  uint64_t blocks_per_chunk = 0;
  double seconds = 0;
  uint64_t stores = 0;
  uint64_t loads = 0;
  uint64_t spills = 0;                  // disk tier jobs (with --spill-dir)
  uint64_t restores = 0;
  uint64_t bytes_moved = 0;             // between GPUs and host, over all ranks
  uint64_t disk_bytes = 0;              // between host and disk (spills and restores)
  std::vector<double> quorum_ms;        // dispatch to quorum, per completed job
  std::vector<double> fence_wait_ms;    // per retired chunk: retire to reusable (holds and fence)
  std::vector<FailedJob> failures;      // jobs that cannot reach quorum (a rank died)
  std::vector<std::string> events;      // what happened to ranks (deaths, restarts), one line each
  bool stopped_by_dead_rank = false;    // a rank died without --restart: the run ended there
  uint64_t loads_checked = 0;           // loads every rank verified block by block
  uint64_t chunks_verified = 0;         // (chunk, rank) host copies checked at the end
  uint64_t bytes_verified = 0;
  SchedulerFigures figures;
};

// Runs the demo. Throws Error for setup failures (arena, fork) and when a check fails (a wrong
// byte anywhere, a worker that fails on its own); a dead rank is not thrown: it is in
// result.failures and result.events, and without --restart the run ends there.
DemoResult run_demo(const DemoConfig& config);

}  // namespace hugepin::demo
