// SchedulerSession: an engine scheduler's side of hugepin, one per engine.
//
//   SchedulerSession scheduler = SchedulerSession::create(real_os(), "kv", plan, {}, {});
//   JobId job = scheduler.dispatch(JobKind::kStore, chunks);  // pins; then send the job to ranks
//   scheduler.drain(timeout_ns);                              // apply what the rings carry
//   scheduler.take_completed(&done);                          // every rank reported: quorum
//   scheduler.retire(chunk);  scheduler.begin_epoch();  scheduler.take_reusable(&free);
//
// It owns the arena's scheduler role (ipc/arena_control.h: the one consumer of every rank's
// ring) and the OffloadScheduler (protocol/offload_scheduler.h: copy pins, quorum, fence, dead
// ranks). drain() applies every waiting report and watches the rank processes: each process that
// attached is watched by pidfd (ipc/process_watch.h), and when one is gone its rank's open jobs
// fail and their chunks stay quarantined until then, never earlier. How a job reaches the
// workers is the engine's business; the session needs only the job id and its chunks.
//
// Thread-safety: none; one scheduler thread calls everything. Movable.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/os.h"
#include "ipc/arena_control.h"
#include "ipc/process_watch.h"
#include "planner/capacity_plan.h"
#include "protocol/offload_scheduler.h"
#include "session/chunk_geometry.h"
#include "session/planned_arena.h"

namespace hugepin {

struct SchedulerSessionOptions {
  uint32_t max_jobs_in_flight = 4096;
  ComputeBarrier compute_barrier = ComputeBarrier::kRequired;
  // create(): leave the arena behind when the session ends (a daemon or a later scheduler adopts it).
  bool keep_arena = false;
  // A live rank that posts nothing (not even a heartbeat) this long is declared unresponsive;
  // 0: never (process exits alone decide).
  int64_t heartbeat_timeout_ns = 0;
  // How often drain() publishes the scheduler's figures for the inspector and metrics.
  int64_t publish_interval_ns = 100'000'000;
  // How late drain()'s timeout may end a wait in which nothing happened (0: the thread's timer
  // slack, 50 us by default). At a tick or more (4 ms at HZ 250) the kernel folds the timer into
  // the tick instead of reprogramming the CPU's timer for it twice a sleep, which in a virtual
  // machine costs the sleeping thread about half of its sleep (base/timer_slack.h). Wakes for
  // progress are never late, but they can come later: on the H200 host at 4 ms, `hugepin bench
  // offload` without MPS took 22% less of the scheduler's CPU per job at the median, and its jobs'
  // SEEN p99 rose from 50-188 to 85-439 us (docs/performance.md, "A timer slack for the scheduler's
  // sleeps"; a 200 us timeout did the opposite): a CPU that a 1 ms timer no longer wakes idles
  // longer, and runs again later. For a scheduler that counts its CPU before its tail latency; its
  // timeout is then a liveness backstop, not a clock.
  int64_t wait_timer_slack_ns = 0;
};

// How drain()'s waits on the report gate ended, counted since the session began (waits met at
// once included; ipc/report_gate.h: GateWaitEnd): `timed_out`, the target not met by the
// deadline; `woken_late`, the timer fired with the target met and a wake asked for, not arrived;
// `no_wake`, the timer fired with the target met and no wake asked for yet (a producer between its
// count and its wake, or a fault of the gate).
struct GateWaitCounts {
  uint64_t waits = 0;
  uint64_t timed_out = 0;
  uint64_t woken_late = 0;
  uint64_t no_wake = 0;
};

// A rank whose process was found gone, and what that cost.
struct RankExit {
  uint32_t rank = 0;
  uint64_t pid = 0;
  size_t jobs_failed = 0;  // jobs that can no longer reach quorum
};

class SchedulerSession {
 public:
  // Creates arena `arena` from `plan` (session/planned_arena.h; `options.page_size` 0: the plan's)
  // and takes its scheduler role. Throws Error (EEXIST when it exists), leaving nothing behind.
  static SchedulerSession create(Os& os, std::string_view arena, const planner::CapacityPlan& plan,
                                 const ArenaOptions& arena_options, const SchedulerSessionOptions& options,
                                 const ControlOptions& control = {}, ArenaCreated* created = nullptr);
  // Takes the scheduler role of an existing arena. Throws Error (ENOENT, EBUSY naming the pid).
  static SchedulerSession adopt(Os& os, std::string_view arena, const SchedulerSessionOptions& options);

  // Publishes the final figures, gives the role back, and destroys the arena when this session
  // created it (unless keep_arena). Failures are logged.
  ~SchedulerSession();
  SchedulerSession(SchedulerSession&& other) noexcept;
  SchedulerSession& operator=(SchedulerSession&&) = delete;
  SchedulerSession(const SchedulerSession&) = delete;
  SchedulerSession& operator=(const SchedulerSession&) = delete;

  // OffloadScheduler::dispatch, with errno codes: EINVAL for no chunks, ERANGE naming a chunk out
  // of range, EBUSY for everything the protocol refuses (a rank not live, a chunk retired or
  // quarantined, too many jobs open).
  JobId dispatch(JobKind kind, std::span<const ChunkId> chunks);
  // Applies every report waiting on the rings. When there is none, waits up to `timeout_ns` (0: no
  // wait; negative: no limit) for progress: enough reports that a job could settle or the
  // all-rank epoch advance (a retired chunk pass the fence), or a rank failing a copy, attaching
  // or detaching (reports that cannot
  // settle anything alone stay on the rings meanwhile: the ranks wake this thread about once per
  // job, not once per report; ipc/report_gate.h). Then notices silent ranks and rank processes
  // that are gone (every call that applied nothing, and every 10 ms while reports flow).
  // Returns the number of reports applied.
  size_t drain(int64_t timeout_ns);
  // A rank's process is known gone (the engine reaped it, say): as drain() would find it, now.
  // Idempotent; returns the jobs it failed (0 when the rank had already left).
  size_t rank_process_gone(uint32_t rank);

  void take_completed(std::vector<JobId>* out) { scheduler_.take_completed(out); }
  void take_failed(std::vector<FailedJob>* out) { scheduler_.take_failed(out); }
  void take_rank_exits(std::vector<RankExit>* out);
  // ERANGE for a chunk out of range; EINVAL when it is not active.
  void retire(ChunkId chunk);
  Epoch begin_epoch() { return scheduler_.begin_epoch(); }
  void take_reusable(std::vector<ChunkId>* out) { scheduler_.take_reusable(out); }
  // Writes the figures for the inspector now.
  void publish();

  const GateWaitCounts& gate_waits() const { return gate_waits_; }
  const OffloadScheduler& protocol() const { return scheduler_; }
  const ChunkGeometry& geometry() const { return geometry_; }
  const ArenaLayout& layout() const { return layout_; }
  const std::string& arena() const { return arena_; }
  bool created_arena() const { return created_; }
  ArenaControl& control() { return control_; }
  const ArenaControl& control() const { return control_; }

 private:
  SchedulerSession(Os& os, std::string_view arena, ArenaControl control, const SchedulerSessionOptions& options,
                   bool created);
  void apply(const Report& report);
  size_t apply_waiting();
  size_t wait_and_apply(int64_t timeout_ns);
  // What the sleeping drain() waits for on the report gate (ipc/report_gate.h), besides urgent
  // reports and ended job tallies: `reports` gated reports, or `releases` compute-releases (0:
  // none).
  struct WaitTargets {
    uint64_t reports = 1;
    uint64_t releases = 0;
  };
  WaitTargets wait_targets() const;
  void count_wait(GateWaitEnd end);
  void check_processes();
  void check_heartbeats(int64_t now);

  Os* os_;
  std::string arena_;
  SchedulerSessionOptions options_;
  bool created_;
  ArenaControl control_;
  ArenaLayout layout_;
  ChunkGeometry geometry_;
  OffloadScheduler scheduler_;
  // Whether jobs open tallies on the gate: their quorum table is no larger than the gate's
  // (ReportGate::kTallySlots), so no two open jobs share a tally.
  bool tallies_;
  ProcessWatch watch_;
  std::vector<int64_t> last_heard_;  // per rank, monotonic ns
  std::vector<RankExit> exits_;
  std::vector<Report> reports_;      // drain()'s buffer
  std::vector<uint32_t> gone_;       // check_processes()'s buffer
  int64_t last_publish_ = 0;
  int64_t last_watch_ = 0;
  GateWaitCounts gate_waits_;
};

}  // namespace hugepin
