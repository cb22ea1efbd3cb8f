// From the scheduler's own figures (offload_scheduler.h) to the part it publishes in the control
// segment for the inspector and metrics (scheduler_counters.h).
#pragma once

#include "protocol/offload_scheduler.h"
#include "ipc/scheduler_counters.h"

namespace hugepin {

inline PublishedFigures published_figures(const SchedulerFigures& figures) {
  PublishedFigures out;
#define HUGEPIN_COPY_FIGURE(type, name, kind, help, label) out.name = figures.name;
  HUGEPIN_PUBLISHED_FIGURES(HUGEPIN_COPY_FIGURE)
#undef HUGEPIN_COPY_FIGURE
  return out;
}

}  // namespace hugepin
