// Arenas with a control segment: the data regions (hugemem/arena.h) and /dev/shm/hugepin.<arena>,
// created, listed and destroyed together; and ArenaControl, the scheduler's handle on one.
//
// Thread-safety: the free functions may run concurrently for different arenas. An ArenaControl
// is used by one thread at a time (it is the one consumer of every ring).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/os.h"
#include "hugemem/arena.h"
#include "ipc/arena_layout.h"
#include "ipc/control_segment.h"
#include "protocol/report.h"
#include "ipc/scheduler_counters.h"

namespace hugepin {

struct ControlOptions {
  uint32_t ring_capacity = kDefaultRingCapacity;  // records per rank ring: a power of two
};

struct ArenaCreated {
  ArenaReport data;           // the regions, as hugemem made them
  std::string segment_path;   // /dev/shm/hugepin.<arena>
  uint64_t segment_bytes = 0;
  uint32_t ring_capacity = 0;
};

// Creates arena `name`: one data region per rank of `layout` (region rank = flat rank, sized
// region_bytes, on the rank's node; `options` choose pages and permissions as for create_arena),
// then its control segment, filled from what the regions obtained. Throws Error, leaving nothing
// behind: the layout does not check out, the arena or its segment exists, the regions cannot be
// made, the segment cannot.
ArenaCreated create_arena_with_control(Os& os, std::string_view name, const ArenaLayout& layout,
                                       const ArenaOptions& options, const ControlOptions& control = {},
                                       const RegionProgress& progress = {});

struct SegmentFile {
  std::string path;
  uint64_t bytes = 0;
  uid_t owner = 0;
  gid_t group = 0;
  mode_t mode = 0;
};

struct ArenaEntry {
  std::string name;
  std::optional<SegmentFile> control;  // nullopt: data files only (no segment, or a crash before it)
  std::vector<RegionFile> regions;     // by rank; empty: a segment without data files
};

// Every arena on the machine, by name: control segments in /dev/shm, and data files hugemem finds
// under `where` (leftovers without a segment included). Listed as list_arenas lists: nothing is
// opened or followed, and what is refused (a link or a FIFO named as a segment, ...) is left out
// with one line each in `refused`.
std::vector<ArenaEntry> list_arenas_with_control(Os& os, const ArenaOptions& where = {},
                                                 std::vector<std::string>* refused = nullptr);

struct ArenaDestroyed {
  bool control_removed = false;
  size_t region_files = 0;
};

// Removes the control segment and every data file of arena `name`. Warns (log) when a live worker
// is still attached (its mappings stay valid until it exits). Throws Error when the arena has
// neither, or a file cannot be removed.
ArenaDestroyed destroy_arena_with_control(Os& os, std::string_view name, const ArenaOptions& where = {});

// Bumps the arena's generation and returns the new value: what a scheduler's adoption does, and
// what hugepind does when it adopts an arena at start (so that every process can tell that the
// arena changed hands). Lock-free. Throws Error when `segment` is open read-only.
uint64_t bump_generation(ControlSegment& segment);

// Marks rank `rank` of `segment` dead when the worker that holds it no longer runs; true when it
// did. A worker that attaches meanwhile wins (the attach generation makes the mark fail). The
// scheduler (ArenaControl::mark_dead_if_gone) and hugepind's reaper both call it: marking twice
// is harmless. Throws Error when `segment` is open read-only. REQUIRES: rank < rank_count.
bool mark_rank_dead_if_gone(Os& os, ControlSegment& segment, uint32_t rank);

// The scheduler's handle on an arena: the one consumer of every rank's ring and the one writer of
// the scheduler counters. Owns the control segment's mapping; move-only. Gives the role back when
// destroyed (not in a forked child that inherited it: the role stays with the parent).
//
// A segment truncated under the scheduler by another process never kills it (the mapping is
// guarded: base/truncation_guard.h): consume, wait_for_reports, rank_status, mark_dead_if_gone and
// publish then throw Error (EIO) naming the segment, and the run stops with that message.
class ArenaControl {
 public:
  // Maps the control segment of arena `name` read-write and takes the scheduler role: refused
  // (Error EBUSY naming the pid) while another live process holds it; taken over when its holder
  // died. Bumps the arena's generation. Throws Error as ControlSegment::open does.
  static ArenaControl adopt(Os& os, std::string_view name);

  ArenaControl() = default;
  ~ArenaControl();
  ArenaControl(ArenaControl&& other) noexcept;
  ArenaControl& operator=(ArenaControl&& other) noexcept;
  ArenaControl(const ArenaControl&) = delete;
  ArenaControl& operator=(const ArenaControl&) = delete;

  const SegmentHeader& header() const { return segment_.header(); }
  // The arena's generation as this adoption set it.
  uint64_t generation() const { return generation_; }
  // The layout the segment records (tp, pp, chunks, each rank's payload, region and node, plan).
  ArenaLayout layout() const;

  // Moves up to out.size() reports of ring `rank` into `out`, oldest first; returns how many.
  // REQUIRES: rank < header().rank_count.
  size_t consume(uint32_t rank, std::span<Report> out);
  // True once any ring holds a report; false when `timeout_ns` (negative: no limit) passes first.
  // Sleeps on the arena's report gate (ipc/report_gate.h).
  bool wait_for_reports(int64_t timeout_ns);
  // The gate's counts now: take the mark, then consume, then wait from the mark; a report that
  // arrives in between is never slept through.
  GateMark report_mark() const;
  // True once `reports` (>= 1) reports that wake no one alone (copy-complete, compute-release,
  // heartbeat) were counted past `since`, or any urgent one (copy-failed, attach, detach); false
  // when `timeout_ns` (negative: no limit) passes first. The workers make a system call only
  // when the target is met while the scheduler sleeps.
  // Also true once a job's tally ended (open_job_tally), and, with `releases` > 0, once that many
  // compute-releases were counted past `since`.
  // `end`, when given, says how the wait ended (ipc/report_gate.h: GateWaitEnd). The timeout may
  // end the wait up to `slack_ns` late (ReportGate::wait).
  bool wait_for_reports(const GateMark& since, uint64_t reports, int64_t timeout_ns, uint64_t releases = 0,
                        GateWaitEnd* end = nullptr, int64_t slack_ns = 0);
  // Opens job `job`'s tally on the gate: the worker whose copy report is the last of `ranks`
  // wakes a sleeping scheduler (ipc/report_gate.h). REQUIRES: ReportGate::open_tally's.
  void open_job_tally(uint64_t job, uint32_t ranks);
  // Ends it: every later report of the job wakes the scheduler (a rank of the job is gone).
  void end_job_tally(uint64_t job);

  RankStatus rank_status(uint32_t rank);
  // Marks rank `rank` dead when the worker that holds it no longer runs; true when it did. A
  // worker that attaches meanwhile wins (the attach generation makes the mark fail).
  bool mark_dead_if_gone(uint32_t rank);

  // Publishes the scheduler's figures for the inspector and metrics. REQUIRES: this process
  // holds the role through this object (adopted here; not moved from, not inherited by a fork).
  void publish(const PublishedFigures& figures);

  ControlSegment& segment() { return segment_; }

 private:
  void release();

  Os* os_ = nullptr;
  ControlSegment segment_;
  uint64_t owner_ = 0;
  uint64_t generation_ = 0;
  std::vector<ReportRing*> rings_;
};

}  // namespace hugepin
