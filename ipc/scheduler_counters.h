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
#include <iterator>

#include "ipc/doorbell.h"
#include "protocol/scheduler_figures.h"

namespace hugepin {

// Plain values: what the scheduler publishes for the inspector at one moment, one field per row of
// HUGEPIN_PUBLISHED_FIGURES (protocol/scheduler_figures.h; the copy from OffloadScheduler's
// figures is session/published_figures.h).
struct PublishedFigures {
#define HUGEPIN_PUBLISHED_VALUE(type, name, kind, help, label) uint64_t name = 0;
  HUGEPIN_PUBLISHED_FIGURES(HUGEPIN_PUBLISHED_VALUE)
#undef HUGEPIN_PUBLISHED_VALUE
};

// The fields of PublishedFigures in the order of kPublishedFigures: for code that lists them all.
inline constexpr uint64_t PublishedFigures::*kPublishedFields[] = {
#define HUGEPIN_PUBLISHED_MEMBER(type, name, kind, help, label) &PublishedFigures::name,
    HUGEPIN_PUBLISHED_FIGURES(HUGEPIN_PUBLISHED_MEMBER)
#undef HUGEPIN_PUBLISHED_MEMBER
};
static_assert(std::size(kPublishedFields) == std::size(kPublishedFigures));

// The figures in shared memory. Built in place by the control segment's creator (all zero).
struct alignas(kCacheLinePair) SchedulerCounters {
  // The scheduler holding the role: pid in the low 32 bits, the low 32 bits of its start time in
  // the high ones (ipc/owner_word.h); 0 when none ever did.
  std::atomic<uint64_t> owner{0};
  std::atomic<uint64_t> version{0};      // odd while a write is in progress
  std::atomic<int64_t> updated_ns{0};    // CLOCK_MONOTONIC of the last write; 0: never written
#define HUGEPIN_PUBLISHED_COUNTER(type, name, kind, help, label) std::atomic<uint64_t> name{0};
  HUGEPIN_PUBLISHED_FIGURES(HUGEPIN_PUBLISHED_COUNTER)
#undef HUGEPIN_PUBLISHED_COUNTER
};

// Part of the control segment's layout: the eight figures of layout version 2 (ipc/control_layout.h),
// at 8-byte steps after updated_ns. A published figure added or moved changes the layout: bump
// kControlLayoutVersion, then this count.
static_assert(std::size(kPublishedFigures) == 8 && sizeof(SchedulerCounters) == kCacheLinePair,
              "the published figures changed: bump kControlLayoutVersion (ipc/control_layout.h)");

struct SchedulerReading {
  PublishedFigures figures;
  int64_t updated_ns = 0;   // 0: no scheduler has written figures yet
  bool consistent = true;   // false: a write was in progress (or its writer died in it)
};

// Publishes `figures`, written at CLOCK_MONOTONIC `now_ns` (updated_ns). REQUIRES: the caller is
// the one writer (holds the scheduler role). Not checked here: the role's word lives in shared
// memory that other processes write (a segment truncated or taken over reads as another owner),
// so a check would abort on their doing, not a caller's bug. ArenaControl::publish, the one
// caller, checks its own hold of the role.
void write_scheduler_figures(SchedulerCounters& counters, const PublishedFigures& figures, int64_t now_ns);

// Reads the figures without a lock; retries a few times while a write is in progress.
SchedulerReading read_scheduler_figures(const SchedulerCounters& counters);

}  // namespace hugepin
