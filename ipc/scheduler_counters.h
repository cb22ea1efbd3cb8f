// The figures the scheduler publishes for the inspector and metrics, in the control segment.
//
// One writer: the process that holds the arena's scheduler role (ArenaControl). Readers (the
// inspector, metrics) take no lock: a version counter that is odd while a write is in progress
// tells them whether what they read was one write's figures; a writer that died mid-write leaves
// it odd, and readers then say the figures may be torn instead of waiting.
//
// Thread-safety: one writer at a time; any number of readers, read-only mappings included.
#pragma once

#include <atomic>
#include <cstdint>

#include "ipc/doorbell.h"

namespace hugepin {

// Plain values: what the scheduler publishes for the inspector at one moment (the part of
// OffloadScheduler::figures() that lives in the control segment; see session/published_figures.h).
struct PublishedFigures {
  uint64_t pinned_chunks = 0;                 // chunks that hold at least one copy pin
  uint64_t jobs_waiting_quorum = 0;           // copy jobs not yet reported complete by every rank
  uint64_t retired_chunks_waiting_fence = 0;  // retired chunks some rank's compute may still touch
  uint64_t dead_ranks = 0;                    // ranks whose worker died and was not replaced
  uint64_t jobs_completed = 0;                // total: jobs that reached quorum
  uint64_t jobs_failed = 0;                   // total: jobs that can never reach quorum
  uint64_t reports_applied = 0;               // total: reports the scheduler acted on
  uint64_t reports_rejected = 0;              // total: reports it refused (bad sequence, unknown job)
};

// The figures in shared memory. Built in place by the control segment's creator (all zero).
struct alignas(kCacheLinePair) SchedulerCounters {
  // The scheduler holding the role: pid in the low 32 bits, the low 32 bits of its start time in
  // the high ones (ipc/owner_word.h); 0 when none ever did.
  std::atomic<uint64_t> owner{0};
  std::atomic<uint64_t> version{0};      // odd while a write is in progress
  std::atomic<int64_t> updated_ns{0};    // CLOCK_MONOTONIC of the last write; 0: never written
  std::atomic<uint64_t> pinned_chunks{0};
  std::atomic<uint64_t> jobs_waiting_quorum{0};
  std::atomic<uint64_t> retired_chunks_waiting_fence{0};
  std::atomic<uint64_t> dead_ranks{0};
  std::atomic<uint64_t> jobs_completed{0};
  std::atomic<uint64_t> jobs_failed{0};
  std::atomic<uint64_t> reports_applied{0};
  std::atomic<uint64_t> reports_rejected{0};
};

struct SchedulerReading {
  PublishedFigures figures;
  int64_t updated_ns = 0;   // 0: no scheduler has written figures yet
  bool consistent = true;   // false: a write was in progress (or its writer died in it)
};

// Publishes `figures`, written at CLOCK_MONOTONIC `now_ns` (updated_ns). REQUIRES: the caller is
// the one writer (holds the scheduler role).
void write_scheduler_figures(SchedulerCounters& counters, const PublishedFigures& figures, int64_t now_ns);

// Reads the figures without a lock; retries a few times while a write is in progress.
SchedulerReading read_scheduler_figures(const SchedulerCounters& counters);

}  // namespace hugepin
