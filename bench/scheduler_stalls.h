// Where a late job's time went on the scheduler's side, for `hugepin bench offload`.
//
// A job's SEEN time runs from the moment its last rank learned that its copies landed to the
// moment the scheduler saw its quorum. On the H200 host both protocol rows had SEEN p99 of
// 0.3-2.5 ms in some runs and not in others, unexplained (docs/performance.md). Causes leave
// different traces, and these figures tell them apart:
//   - the scheduler thread was busy elsewhere (dispatching, the benchmark's bookkeeping), or not
//     running at all though not waiting for a CPU (a hypervisor's steal): time outside its collect
//     calls inside the job's SEEN span (CollectSpans);
//   - it was runnable but not running: its run-queue wait (schedstat);
//   - the machine's virtual CPUs were not running: steal time (/proc/stat);
//   - nothing woke it for the job: the collect call that saw the quorum had waited out its whole
//     timeout (CollectSpan::waited_out).
// What none of them covers is a wake that came, late.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/os.h"

namespace hugepin::bench {

// One collect call of the scheduler thread: when it ran, and whether its wait ran out (its whole
// timeout passed with nothing waking it; never in a call that does not wait).
struct CollectSpan {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool waited_out = false;
};

// The scheduler thread's collect calls (waiting for or taking completions), in order; everything
// between two spans is time it spent elsewhere.
class CollectSpans {
 public:
  // REQUIRES: span.start_ns >= the previous span's end; span.end_ns >= span.start_ns.
  void add(const CollectSpan& span) { spans_.push_back(span); }
  // Of [from, to), the ns that fall outside every span (0 when to <= from).
  int64_t outside(int64_t from, int64_t to) const;
  // The longest stretch between two consecutive spans.
  int64_t longest_gap() const;
  // Spans whose wait ran out.
  uint64_t waited_out() const;
  // The span holding `at` (a span's end included: a quorum is stamped inside its collect call);
  // none when `at` falls between spans.
  std::optional<CollectSpan> span_at(int64_t at) const;

 private:
  std::vector<CollectSpan> spans_;
};

// A thread's time on a CPU and runnable but waiting for one so far, in ns, from its schedstat file
// (/proc/thread-self/schedstat, /proc/PID/task/TID/schedstat); none when it cannot be read (the
// thread is gone, or the kernel keeps no schedstat).
struct SchedStat {
  int64_t run_ns = 0;
  int64_t wait_ns = 0;
};
std::optional<SchedStat> read_schedstat(Os& os, const std::string& path);

// The machine's CPU time so far, all CPUs, idle included, in USER_HZ ticks (/proc/stat): `steal`
// is the time a hypervisor ran something else while this machine's virtual CPUs wanted to run.
struct MachineCpuTicks {
  uint64_t steal = 0;
  uint64_t total = 0;
};
MachineCpuTicks machine_cpu_ticks(Os& os);
// Steal's share of all CPU time (idle included) between two readings (0 when none passed).
double steal_share(const MachineCpuTicks& before, const MachineCpuTicks& after);

}  // namespace hugepin::bench
