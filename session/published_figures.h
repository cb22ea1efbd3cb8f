// From the scheduler's own figures (offload_scheduler.h) to the part it publishes in the control
// segment for the inspector and metrics (scheduler_counters.h).
#pragma once

#include "protocol/offload_scheduler.h"
#include "ipc/scheduler_counters.h"

namespace hugepin {

inline PublishedFigures published_figures(const SchedulerFigures& figures) {
  PublishedFigures out;
  out.pinned_chunks = figures.pinned_chunks;
  out.jobs_waiting_quorum = figures.jobs_waiting;
  out.retired_chunks_waiting_fence = figures.retired_waiting_fence;
  // Dead: declared unresponsive (process maybe still there) or exited and not yet replaced.
  out.dead_ranks = figures.unresponsive_ranks + figures.exited_ranks;
  out.jobs_completed = figures.jobs_completed;
  out.jobs_failed = figures.jobs_failed;
  out.reports_applied = figures.reports_applied;
  out.reports_rejected = figures.reports_rejected_total();
  return out;
}

}  // namespace hugepin
