// ReportGate: when the scheduler sleeps, wake it only when a report could change something.
//
// Every report of a rank on its ring is counted here after it is published. The scheduler sleeps
// until something can happen: a job can settle (its tally below ended: the last of its reports
// came), the all-rank epoch can advance and a retired chunk pass the fence (as many of the
// slowest ranks' compute-releases came), or something urgent happened; not until the next
// report. At TP x PP ranks every job's reports come one per rank, close together: waking on each
// cost the scheduler a sleep and a wake per report (measured on the H200 host: 12-24 us of its
// CPU per job and rank, most of it in the doorbell's membarrier(2), since dropped, and the futex); the gate wakes
// it once per job at most.
//
// Counts, not records, decide: a report is either gated (copy-complete, compute-release,
// heartbeat: counted in `posted`; compute-releases also in `releases`) or urgent (copy-failed,
// attach, detach: counted in `urgent`, and it wakes a sleeper at once). The sleeper names a mark
// (the counts, read before it consumed the rings), how many gated reports past the mark it waits
// for, and how many compute-releases.
//
// Job tallies make the job part exact. "The fewest reports any job still needs" wakes the
// scheduler early whenever ranks drift apart: with several jobs in flight, the one report a job
// lacks is seldom the next one posted (measured on the H200 host: 2-3.5 sleeps per job at 64 KiB
// blocks). So the scheduler opens a tally per job (the reports it waits for, one per rank, in a
// slot of `tally` indexed by the job id), each producer ticks the job's tally after it published
// the job's copy-complete, and the producer whose tick ends a tally counts that as an urgent
// report: the sleeper wakes when a job can settle, once. Copy-failed reports tick too (and wake
// at once, being urgent), so a job that fails on one rank and completes on the others still wakes
// the sleeper when its last report comes; a rank that is gone ends the tallies of the jobs still
// open (end_tally), so that their remaining reports wake it. A tally is only a wake-up hint; the
// quorum itself is the scheduler's (protocol/completion_quorum.h). The table serves schedulers of
// at most kTallySlots jobs in flight, whose quorum never holds two open jobs in one slot; a larger
// one does without (and waits for the fewest reports any job needs, as above).
//
// The protocol is a symmetric Dekker pair, every access seq_cst, no membarrier: the producer
// publishes its records (ring), counts them (a read-modify-write), then reads `sleepers` and, if
// someone sleeps, `wake_at`; the sleeper stores `wake_at`, counts itself in `sleepers` (a
// read-modify-write), then reads the counts. Either the producer's read of `sleepers` comes
// after the sleeper's count, and then it reads the new `wake_at` too, or the sleeper's read of
// the counts comes after the producer's count. The producer's counting is its fence; it happens
// a few thousand times a second per rank, where a fence costs nothing that shows (a worker's
// publish_batch has none of its own; a ring's push_batch fences once a batch, for its data
// doorbell: ipc/doorbell.h).
//
// A producer that dies between publishing a record and counting it leaves that record uncounted:
// it is applied at the scheduler's next wake (a later report, or its wait's timeout, which also
// finds the dead process). Nothing is lost, and no count ever runs ahead of what was published, so
// a sleeper never spins on a count that cannot be met.
//
// Thread-safety: any number of producers (one per ring, in any processes) and one sleeper.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/os.h"
#include "ipc/doorbell.h"
#include "protocol/report.h"

namespace hugepin {

// Reports that wake a sleeping scheduler at once: a failure, a rank arriving or leaving.
inline bool urgent_report(ReportKind kind) {
  return kind == ReportKind::kCopyFailed || kind == ReportKind::kAttach || kind == ReportKind::kDetach;
}

// How a sleeper's wait ended (ReportGate::wait). When its timer fires with its target met, what
// met it was counted while a producer could see the sleeper, and a wake is owed: the futex word
// bumped since the sleeper read it says the wake was asked for and had not arrived (a producer
// preempted between its bump and its FUTEX_WAKE, a virtual CPU not run in time); not bumped, that
// it had not been asked for yet (a producer between its count and its bump, or a fault of the
// gate). On the development VM, 5 of 301 timed-out waits were late and none unasked
// (docs/performance.md).
enum class GateWaitEnd : uint8_t {
  kMet,        // met before its timer fired, by a wake or at once: returned true
  kTimedOut,   // its target not met by the deadline: returned false
  kWokenLate,  // its timer fired, the target met, the word bumped since it slept: returned true
  kNoWake,     // its timer fired, the target met, the word not bumped: returned true
};

// The counts at one moment (read before consuming: what is counted there is on the rings then).
struct GateMark {
  uint64_t posted = 0;
  uint64_t urgent = 0;
  uint64_t releases = 0;
};

struct alignas(kCacheLinePair) ReportGate {
  static constexpr uint32_t kTallySlots = 4096;  // the scheduler's default max_jobs_in_flight

  std::atomic<uint64_t> posted{0};   // gated reports counted, by every producer
  std::atomic<uint64_t> urgent{0};   // urgent reports and ended tallies counted
  std::atomic<uint64_t> releases{0};  // compute-releases counted (also in `posted`)
  std::atomic<uint64_t> wake_at{0};  // the sleeper's target for `posted`
  std::atomic<uint64_t> release_wake_at{0};  // ... for `releases` (~0: none)
  std::atomic<uint32_t> sleepers{0};
  std::atomic<uint32_t> word{0};     // the futex word: bumped by every wake
  // Per job: (job id << 16) | reports it still waits for; written by the scheduler when the job
  // opens, ticked down by the producers.
  alignas(kCacheLinePair) std::atomic<uint64_t> tally[kTallySlots] = {};

  // A producer counts what it just published (REQUIRES: the records are on its ring, a release
  // store before this call; `release_count` of the gated ones are compute-releases) and wakes the
  // sleeper when one of its targets is met or `urgent_count` > 0.
  void count(Os& os, uint32_t gated_count, uint32_t urgent_count, uint32_t release_count = 0);

  // The scheduler opens job `job`'s tally: `reports` (1 to 65535) reports must come. REQUIRES:
  // no other open job of this scheduler has the same id modulo kTallySlots.
  void open_tally(uint64_t job, uint32_t reports);
  // A producer ticks job `job`'s tally after publishing its report of the job. Returns true when
  // that ended the tally (the job has every report it waited for; an extra tick of an ended tally
  // also returns true, so that a duplicate can only wake the sleeper early, never leave it
  // asleep), false when the slot holds another job's tally (a job of another scheduler, or
  // none) or reports are still missing.
  bool tick_tally(uint64_t job);
  // The scheduler ends job `job`'s tally (when its slot still holds it): every later report of
  // the job wakes the sleeper. For a job that settles without all its reports (a rank gone).
  void end_tally(uint64_t job);
  // A scheduler that takes over: forgets every tally (its predecessor's ids may come again).
  void forget_tallies();

  // The counts now (seq_cst).
  GateMark mark() const;

  // Returns true once `gated` reports past `since` were counted, or `releases_wanted`
  // compute-releases (0: none awaited), or any urgent report or ended tally; false when
  // `timeout_ns` (negative: no limit) passes first, or up to `slack_ns` after that (0: the
  // thread's timer slack; a wider one lets the kernel fold the timer into a tick: base/timer_slack.h).
  // `end`, when given, says how (GateWaitEnd). REQUIRES: one sleeper at a time; gated >= 1.
  bool wait(Os& os, const GateMark& since, uint64_t gated, int64_t timeout_ns, uint64_t releases_wanted = 0,
            GateWaitEnd* end = nullptr, int64_t slack_ns = 0);

  // A scheduler that takes over from one that died: forgets that the dead one may have been
  // asleep (producers would otherwise wake nobody with a system call per report).
  void forget_sleeper() { sleepers.store(0, std::memory_order_relaxed); }
};

}  // namespace hugepin
