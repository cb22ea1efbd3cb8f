#include "session/scheduler_session.h"

#include <algorithm>
#include <cerrno>

#include "base/error.h"
#include "base/log.h"
#include "ipc/doorbell.h"
#include "ipc/report_gate.h"
#include "session/published_figures.h"

namespace hugepin {
namespace {

SchedulerConfig scheduler_config(const ChunkGeometry& geometry, const SchedulerSessionOptions& options) {
  SchedulerConfig config;
  config.tp = geometry.tp();
  config.pp = geometry.pp();
  config.chunks = static_cast<uint32_t>(geometry.chunk_count());  // ChunkGeometry checked the range
  config.max_jobs_in_flight = options.max_jobs_in_flight;
  config.compute_barrier = options.compute_barrier;
  return config;
}

// Reports moved from the rings per pop: a few cache lines' worth keeps a pass cheap.
constexpr size_t kDrainBatch = 256;
// How often a busy drain() looks for rank processes that are gone (an idle one always looks).
constexpr int64_t kWatchIntervalNs = 10'000'000;

}  // namespace

SchedulerSession::SchedulerSession(Os& os, std::string_view arena, ArenaControl control,
                                   const SchedulerSessionOptions& options, bool created)
    : os_(&os),
      arena_(arena),
      options_(options),
      created_(created),
      control_(std::move(control)),
      layout_(control_.layout()),
      geometry_(ChunkGeometry::of_layout(layout_)),
      scheduler_(scheduler_config(geometry_, options)),
      tallies_(scheduler_.quorum().capacity() <= ReportGate::kTallySlots),
      watch_(os),
      last_heard_(geometry_.ranks(), os.monotonic_ns()),
      reports_(kDrainBatch) {
  // Workers that attached before this adoption announced themselves to an earlier consumer (or
  // their kAttach is still on the ring): watch the processes the records name now.
  for (uint32_t rank = 0; rank < geometry_.ranks(); ++rank) {
    const RankStatus status = control_.rank_status(rank);
    if (status.alive && status.pid > 0) watch_.watch(rank, status.pid);
  }
}

SchedulerSession SchedulerSession::create(Os& os, std::string_view arena, const planner::CapacityPlan& plan,
                                          const ArenaOptions& arena_options, const SchedulerSessionOptions& options,
                                          const ControlOptions& control, ArenaCreated* created) {
  ChunkGeometry::of_plan(plan);  // refuses a plan whose chunk ids do not fit before anything is made
  PlannedArena planned = planned_arena(plan);
  ArenaOptions where = arena_options;
  if (where.page_size == 0) where.page_size = planned.page_size;
  ArenaCreated made = create_arena_with_control(os, arena, planned.layout, where, control);
  try {
    SchedulerSession session(os, arena, ArenaControl::adopt(os, arena), options, /*created=*/true);
    if (created != nullptr) *created = std::move(made);
    return session;
  } catch (...) {
    try {
      destroy_arena_with_control(os, arena, where);
    } catch (const std::exception& error) {
      log::warn(cat("arena '", arena, "': cleaning up after a failed create: ", error.what()));
    }
    throw;
  }
}

SchedulerSession SchedulerSession::adopt(Os& os, std::string_view arena, const SchedulerSessionOptions& options) {
  return SchedulerSession(os, arena, ArenaControl::adopt(os, arena), options, /*created=*/false);
}

SchedulerSession::SchedulerSession(SchedulerSession&& other) noexcept
    : os_(other.os_),
      arena_(std::move(other.arena_)),
      options_(other.options_),
      created_(std::exchange(other.created_, false)),
      control_(std::move(other.control_)),
      layout_(std::move(other.layout_)),
      geometry_(std::move(other.geometry_)),
      scheduler_(std::move(other.scheduler_)),
      tallies_(other.tallies_),
      watch_(std::move(other.watch_)),
      last_heard_(std::move(other.last_heard_)),
      exits_(std::move(other.exits_)),
      reports_(std::move(other.reports_)),
      gone_(std::move(other.gone_)),
      last_publish_(other.last_publish_),
      last_watch_(other.last_watch_),
      gate_waits_(other.gate_waits_) {
  other.os_ = nullptr;
}

SchedulerSession::~SchedulerSession() {
  if (os_ == nullptr) return;  // moved from
  try {
    publish();
  } catch (const std::exception& error) {
    log::warn(cat("arena '", arena_, "': publishing the last figures: ", error.what()));
  }
  if (!created_ || options_.keep_arena) return;
  control_ = ArenaControl();  // give the role back before the segment goes
  try {
    destroy_arena_with_control(*os_, arena_);
  } catch (const std::exception& error) {
    log::warn(cat("arena '", arena_, "': destroying it: ", error.what()));
  }
}

JobId SchedulerSession::dispatch(JobKind kind, std::span<const ChunkId> chunks) {
  if (chunks.empty()) throw Error("a job needs at least one chunk", EINVAL);
  for (ChunkId chunk : chunks) {
    if (chunk >= geometry_.chunk_count()) {
      throw Error(cat("chunk ", chunk, " is out of range (arena '", arena_, "' has ", geometry_.chunk_count(), ")"),
                  ERANGE);
    }
  }
  JobId job = 0;
  try {
    job = scheduler_.dispatch(kind, chunks);
  } catch (const Error& error) {
    throw Error(error.what(), error.errno_value() != 0 ? error.errno_value() : EBUSY);
  }
  // Before the engine can send the job to any rank: a rank's report ticks this tally.
  if (tallies_) control_.open_job_tally(job, geometry_.ranks());
  return job;
}

void SchedulerSession::retire(ChunkId chunk) {
  if (chunk >= geometry_.chunk_count()) {
    throw Error(cat("chunk ", chunk, " is out of range (arena '", arena_, "' has ", geometry_.chunk_count(), ")"),
                ERANGE);
  }
  try {
    scheduler_.retire(chunk);
  } catch (const Error& error) {
    throw Error(error.what(), error.errno_value() != 0 ? error.errno_value() : EINVAL);
  }
}

size_t SchedulerSession::drain(int64_t timeout_ns) {
  const size_t applied = timeout_ns == 0 ? apply_waiting() : wait_and_apply(timeout_ns);
  const int64_t now = os_->monotonic_ns();
  // A pidfd poll per rank is a system call each: while reports flow, look every kWatchInterval.
  if (applied == 0 || now - last_watch_ >= kWatchIntervalNs) {
    check_processes();
    last_watch_ = now;
  }
  if (options_.heartbeat_timeout_ns > 0) check_heartbeats(now);
  if (now - last_publish_ >= options_.publish_interval_ns) publish();
  return applied;
}

size_t SchedulerSession::apply_waiting() {
  size_t applied = 0;
  for (uint32_t rank = 0; rank < geometry_.ranks(); ++rank) {
    for (size_t n; (n = control_.consume(rank, reports_)) > 0;) {
      for (size_t i = 0; i < n; ++i) apply(reports_[i]);
      applied += n;
      if (n < reports_.size()) break;
    }
  }
  return applied;
}

size_t SchedulerSession::wait_and_apply(int64_t timeout_ns) {
  const int64_t deadline = deadline_after(*os_, timeout_ns);
  for (;;) {
    // The mark before consuming: whatever was counted by then is on the rings now.
    const GateMark mark = control_.report_mark();
    if (const size_t applied = apply_waiting(); applied > 0) return applied;
    const int64_t remaining = time_left(*os_, deadline);
    if (remaining == 0) return 0;
    const WaitTargets targets = wait_targets();
    GateWaitEnd end = GateWaitEnd::kMet;
    const bool met =
        control_.wait_for_reports(mark, targets.reports, remaining, targets.releases, &end, options_.wait_timer_slack_ns);
    count_wait(end);
    if (!met) return apply_waiting();
  }
}

void SchedulerSession::count_wait(GateWaitEnd end) {
  ++gate_waits_.waits;
  if (end == GateWaitEnd::kTimedOut) ++gate_waits_.timed_out;
  if (end == GateWaitEnd::kWokenLate) ++gate_waits_.woken_late;
  if (end == GateWaitEnd::kNoWake) ++gate_waits_.no_wake;
}

SchedulerSession::WaitTargets SchedulerSession::wait_targets() const {
  // Whatever else it waits for, wake after half a ring's worth of reports, long before any
  // producer could find its ring full while this thread sleeps.
  const uint64_t enough = std::max<uint64_t>(1, control_.header().ring_capacity / 2);
  if (tallies_) {
    // Jobs wake it through their tallies, exactly when one can settle; the fence by a count of
    // compute-releases, which no other report can stand in for.
    return {enough, scheduler_.releases_before_fence_progress()};
  }
  const uint32_t needed = scheduler_.reports_before_progress();
  return {needed == 0 ? enough : std::min<uint64_t>(needed, enough), 0};
}

void SchedulerSession::apply(const Report& report) {
  const ReportVerdict verdict = scheduler_.apply(report);
  if (report.rank < last_heard_.size()) {
    // When the rank posted it (never later than now): a report may wait on the ring until a job
    // can settle (the report gate), and a late-applied heartbeat must not make a silent rank
    // look alive.
    const int64_t now = os_->monotonic_ns();
    const auto posted = static_cast<int64_t>(std::min<uint64_t>(report.time_ns, static_cast<uint64_t>(now)));
    last_heard_[report.rank] = std::max(last_heard_[report.rank], posted);
  }
  if (verdict != ReportVerdict::kApplied || report.kind != ReportKind::kAttach) return;
  try {
    watch_.watch(report.rank, static_cast<pid_t>(report.value));
  } catch (const Error& error) {
    // Without a watch the rank's exit is found only by the engine or a heartbeat timeout.
    log::warn(cat("arena '", arena_, "': cannot watch rank ", report.rank, "'s process: ", error.what()));
  }
}

void SchedulerSession::check_processes() {
  gone_.clear();
  watch_.poll(&gone_);
  for (uint32_t rank : gone_) rank_process_gone(rank);
}

size_t SchedulerSession::rank_process_gone(uint32_t rank) {
  if (rank >= geometry_.ranks()) throw Error(cat("rank ", rank, " is out of range"), ERANGE);
  if (scheduler_.rank_state(rank) == RankLiveness::kExited) return 0;
  const uint64_t pid = scheduler_.rank_pid(rank);
  const size_t failed = scheduler_.rank_unresponsive(rank);
  // Gone: nothing of it can still copy, so its chunks may leave quarantine.
  scheduler_.rank_exited(rank);
  // The jobs still open will not get this rank's report: their tallies would never end (even
  // those it reported, when it died between publishing and ticking). Ended, each later report
  // of them wakes a sleeping drain.
  if (tallies_) {
    for (JobId job : scheduler_.quorum().open_ids()) control_.end_job_tally(job);
  }
  control_.mark_dead_if_gone(rank);
  watch_.forget(rank);
  exits_.push_back({rank, pid, failed});
  return failed;
}

void SchedulerSession::check_heartbeats(int64_t now) {
  for (uint32_t rank = 0; rank < geometry_.ranks(); ++rank) {
    if (scheduler_.rank_state(rank) != RankLiveness::kLive) continue;
    if (now - last_heard_[rank] < options_.heartbeat_timeout_ns) continue;
    log::warn(cat("arena '", arena_, "': ", describe_rank(rank, geometry_.tp()), " silent for ",
                  (now - last_heard_[rank]) / 1'000'000, " ms: declared unresponsive"));
    scheduler_.rank_unresponsive(rank);
  }
}

void SchedulerSession::take_rank_exits(std::vector<RankExit>* out) {
  out->insert(out->end(), exits_.begin(), exits_.end());
  exits_.clear();
}

void SchedulerSession::publish() {
  control_.publish(published_figures(scheduler_.figures()));
  last_publish_ = os_->monotonic_ns();
}

}  // namespace hugepin
