// What the opaque handles of the C ABI hold.
#pragma once

#include <memory>
#include <optional>

#include "hugepin/hugepin.h"
#include "ipc/arena_control.h"
#include "planner/capacity_plan.h"
#include "session/scheduler_session.h"
#include "session/worker_session.h"

struct hugepin_plan {
  hugepin::planner::CapacityPlan plan;
};

struct hugepin_worker {
  std::unique_ptr<hugepin::WorkerSession> session;
  std::vector<hugepin::JobResult> finished;  // take_finished()'s buffer
};

struct hugepin_scheduler {
  std::optional<hugepin::SchedulerSession> session;
  std::vector<hugepin::JobId> completed;        // taken from the session, not yet handed out
  std::vector<hugepin::FailedJob> failed;
  std::vector<hugepin::ChunkId> reusable;
};

namespace hugepin::capi {

// The arena options of the caller's hugepin_arena_options (NULL: defaults); the ring capacity
// goes to `control`. A page size of 0 takes the plan's.
ArenaOptions arena_options_of(const hugepin_arena_options* given, const planner::CapacityPlan& plan,
                              ControlOptions* control);
void fill_arena_info(const SegmentHeader& header, hugepin_arena_info* out);

}  // namespace hugepin::capi
