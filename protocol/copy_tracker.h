// The worker side of completion: turns finished copies and finished GPU steps into the reports a
// rank posts to the scheduler (copy-complete or copy-failed per job, compute-release per epoch).
//
// Work queued on one stream finishes in queue order, so a tracker keeps its launches as an
// ordered list of (event, what finishing it means) and a high-water mark: the highest event
// known done, which covers every earlier one. poll() asks about the oldest unfinished events
// only, and stops at the first that is not done. Use one tracker per stream (loads, stores,
// compute); never mix streams in one tracker, their events finish in no common order.
//
// Events are the caller's numbers, from 1 (the index of a CUDA event in its pool, or a counter
// of host copies). Two callbacks make the tracker work for any backend: `query(event)`, non-blocking,
// is the work queued before `event` done (CUDA: cudaEventQuery; the host memcpy backend copies
// before its launch returns, so always true); and `wait(event)`, blocking, for flush() before
// preempted blocks are reused (CUDA: cudaEventSynchronize). Either may throw; the tracker is
// then unchanged.
//
// Reports come out with kind, rank, flags and value set; sequence and time_ns are 0, for the
// poster (the ring) to stamp.
//
// Thread-safety: none; one thread of the worker owns a tracker.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "protocol/offload_types.h"
#include "protocol/report.h"

namespace hugepin {

class CopyTracker {
 public:
  using Query = std::function<bool(uint64_t event)>;
  using Wait = std::function<void(uint64_t event)>;

  // Reports will carry `rank` (the flat rank). REQUIRES: query and wait are callable; throws
  // Error otherwise.
  CopyTracker(uint16_t rank, Query query, Wait wait);

  // Job `job` was queued on this tracker's stream, followed by `event`. Throws Error, changing
  // nothing, unless `event` is above every event given before.
  void copy_launched(JobId job, uint64_t event);
  // GPU work of every epoch up to `epoch` was queued before `event` (the compute stream's
  // tracker). Throws Error, changing nothing, unless `event` and `epoch` are each above every
  // one given before.
  void epoch_launched(Epoch epoch, uint64_t event);
  // Job `job` could not be queued (`error`: its errno); nothing of it is in flight, so the next
  // poll() reports it copy-failed.
  void copy_failed(JobId job, uint32_t error);

  // Appends a report for every launch found done since the last call, in launch order, and for
  // every copy_failed(); finished epochs coalesce into one compute-release of the highest
  // (a release covers all earlier epochs). Returns the number appended. Non-blocking.
  size_t poll(std::vector<Report>* out);
  // Waits for the newest launched event (everything before it finishes first), then as
  // poll(): after it, nothing of this stream is in flight.
  size_t flush(std::vector<Report>* out);

  // The highest event known done; 0 before any.
  uint64_t high_water_mark() const { return high_water_mark_; }
  // Launches not yet found done.
  size_t pending() const { return launches_.size(); }

 private:
  struct Launch {
    uint64_t event;
    ReportKind kind;
    uint64_t value;
  };

  struct Failure {
    JobId job;
    uint32_t error;
  };

  void check_event(uint64_t event) const;
  Report report(ReportKind kind, uint64_t value, uint32_t flags) const;
  size_t collect(size_t done, std::vector<Report>* out);

  uint16_t rank_;
  Query query_;
  Wait wait_;
  std::deque<Launch> launches_;
  std::vector<Failure> failed_;
  uint64_t last_event_ = 0;
  Epoch last_epoch_ = 0;
  uint64_t high_water_mark_ = 0;
};

}  // namespace hugepin
