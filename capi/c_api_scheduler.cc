// The C ABI of schedulers: SchedulerSession (session/scheduler_session.h) behind hugepin_scheduler.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "capi/c_api_guard.h"
#include "capi/c_api_handles.h"
#include "hugepin/hugepin.h"

using hugepin::capi::guarded;
using hugepin::capi::require;

namespace {

hugepin::SchedulerSession& session_of(hugepin_scheduler* scheduler) {
  require(scheduler, "scheduler");
  return *scheduler->session;
}

hugepin::SchedulerSessionOptions session_options(const hugepin_scheduler_options* given) {
  const hugepin_scheduler_options options = hugepin::capi::read_options(
      given, hugepin_scheduler_options HUGEPIN_SCHEDULER_OPTIONS_INIT, "hugepin_scheduler_options");
  hugepin::SchedulerSessionOptions out;
  if (options.max_jobs_in_flight != 0) out.max_jobs_in_flight = options.max_jobs_in_flight;
  out.compute_barrier = options.waive_compute_barrier != 0 ? hugepin::ComputeBarrier::kWaived
                                                           : hugepin::ComputeBarrier::kRequired;
  out.keep_arena = options.keep_arena != 0;
  if (options.heartbeat_timeout_ns < 0) {
    throw hugepin::Error(hugepin::cat("heartbeat_timeout_ns = ", options.heartbeat_timeout_ns, ": must be 0 or more"),
                         EINVAL);
  }
  out.heartbeat_timeout_ns = options.heartbeat_timeout_ns;
  return out;
}

// Hands out up to `capacity` of `pending` (oldest first), keeping the rest for the next call.
template <typename T, typename Out, typename Convert>
size_t hand_out(std::vector<T>& pending, Out* out, size_t capacity, Convert convert) {
  const size_t n = std::min(capacity, pending.size());
  for (size_t i = 0; i < n; ++i) out[i] = convert(pending[i]);
  pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(n));
  return n;
}

}  // namespace

extern "C" {

int hugepin_scheduler_create(const char* arena, const hugepin_plan* plan, const hugepin_arena_options* arena_options,
                             const hugepin_scheduler_options* options, hugepin_scheduler** out) {
  return guarded([&] {
    require(arena, "arena");
    require(plan, "plan");
    require(out, "out");
    hugepin::ControlOptions control;
    const hugepin::ArenaOptions where = hugepin::capi::arena_options_of(arena_options, plan->plan, &control);
    const hugepin::SchedulerSessionOptions session = session_options(options);
    hugepin::check_arena_name(arena);
    auto scheduler = std::make_unique<hugepin_scheduler>();
    scheduler->session.emplace(
        hugepin::SchedulerSession::create(hugepin::real_os(), arena, plan->plan, where, session, control));
    *out = scheduler.release();
    return 0;
  });
}

int hugepin_scheduler_adopt(const char* arena, const hugepin_scheduler_options* options, hugepin_scheduler** out) {
  return guarded([&] {
    require(arena, "arena");
    require(out, "out");
    const hugepin::SchedulerSessionOptions session = session_options(options);
    hugepin::check_arena_name(arena);
    auto scheduler = std::make_unique<hugepin_scheduler>();
    scheduler->session.emplace(hugepin::SchedulerSession::adopt(hugepin::real_os(), arena, session));
    *out = scheduler.release();
    return 0;
  });
}

int hugepin_scheduler_close(hugepin_scheduler* scheduler) {
  if (scheduler == nullptr) return 0;
  const int rc = guarded([&] {
    scheduler->session.reset();  // logs what it cannot do; never throws
    return 0;
  });
  delete scheduler;
  return rc;
}

int hugepin_scheduler_get_info(const hugepin_scheduler* scheduler, hugepin_arena_info* out) {
  return guarded([&] {
    require(scheduler, "scheduler");
    require(out, "out");
    hugepin::capi::fill_arena_info(scheduler->session->control().header(), out);
    return 0;
  });
}

int hugepin_scheduler_dispatch(hugepin_scheduler* scheduler, hugepin_job_kind kind, const hugepin_chunk_id* chunks,
                               size_t count, hugepin_job_id* job) {
  return guarded([&] {
    hugepin::SchedulerSession& session = session_of(scheduler);
    require(job, "job");
    if (count != 0) require(chunks, "chunks");
    if (kind != HUGEPIN_LOAD && kind != HUGEPIN_STORE) {
      throw hugepin::Error(hugepin::cat("kind ", static_cast<int>(kind), " is not a hugepin_job_kind"), EINVAL);
    }
    static_assert(sizeof(hugepin_chunk_id) == sizeof(hugepin::ChunkId));
    *job = session.dispatch(static_cast<hugepin::JobKind>(kind), std::span<const hugepin::ChunkId>(chunks, count));
    return 0;
  });
}

int hugepin_scheduler_drain(hugepin_scheduler* scheduler, int64_t timeout_ns, size_t* applied) {
  return guarded([&] {
    const size_t n = session_of(scheduler).drain(timeout_ns);
    if (applied != nullptr) *applied = n;
    return 0;
  });
}

int hugepin_scheduler_completed(hugepin_scheduler* scheduler, hugepin_job_id* out, size_t capacity, size_t* count) {
  return guarded([&] {
    hugepin::SchedulerSession& session = session_of(scheduler);
    require(count, "count");
    if (capacity != 0) require(out, "out");
    session.take_completed(&scheduler->completed);
    *count = hand_out(scheduler->completed, out, capacity, [](hugepin::JobId job) { return job; });
    return 0;
  });
}

int hugepin_scheduler_failed(hugepin_scheduler* scheduler, hugepin_failed_job* out, size_t capacity, size_t* count) {
  return guarded([&] {
    hugepin::SchedulerSession& session = session_of(scheduler);
    require(count, "count");
    if (capacity != 0) require(out, "out");
    session.take_failed(&scheduler->failed);
    *count = hand_out(scheduler->failed, out, capacity, [](const hugepin::FailedJob& failed) {
      hugepin_failed_job job{};
      job.job = failed.job;
      job.kind = static_cast<uint32_t>(failed.kind);
      job.rank = failed.rank;
      job.cause = static_cast<int32_t>(failed.cause);
      job.error = static_cast<int32_t>(failed.error);
      std::strncpy(job.message, failed.message.c_str(), sizeof(job.message) - 1);
      return job;
    });
    return 0;
  });
}

int hugepin_scheduler_retire(hugepin_scheduler* scheduler, hugepin_chunk_id chunk) {
  return guarded([&] {
    session_of(scheduler).retire(chunk);
    return 0;
  });
}

int hugepin_scheduler_begin_epoch(hugepin_scheduler* scheduler, hugepin_epoch* epoch) {
  return guarded([&] {
    const hugepin::Epoch next = session_of(scheduler).begin_epoch();
    if (epoch != nullptr) *epoch = next;
    return 0;
  });
}

int hugepin_scheduler_reusable(hugepin_scheduler* scheduler, hugepin_chunk_id* out, size_t capacity, size_t* count) {
  return guarded([&] {
    hugepin::SchedulerSession& session = session_of(scheduler);
    require(count, "count");
    if (capacity != 0) require(out, "out");
    session.take_reusable(&scheduler->reusable);
    *count = hand_out(scheduler->reusable, out, capacity, [](hugepin::ChunkId chunk) { return chunk; });
    return 0;
  });
}

int hugepin_scheduler_get_figures(const hugepin_scheduler* scheduler, hugepin_scheduler_figures* out) {
  return guarded([&] {
    require(scheduler, "scheduler");
    require(out, "out");
    const hugepin::SchedulerFigures f = scheduler->session->protocol().figures();
    *out = {f.live_ranks,       f.pinned_chunks,   f.quarantined_chunks, f.jobs_waiting_quorum,
            f.current_epoch,    f.all_rank_epoch,  f.jobs_dispatched,    f.jobs_completed,
            f.jobs_failed,      f.reports_applied, f.reports_rejected};
    return 0;
  });
}

}  // extern "C"
