#include "ipc/scheduler_counters.h"

namespace hugepin {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

void store_figures(SchedulerCounters& counters, const SchedulerFigures& figures) {
  counters.pinned_chunks.store(figures.pinned_chunks, kRelaxed);
  counters.jobs_waiting_quorum.store(figures.jobs_waiting_quorum, kRelaxed);
  counters.retired_chunks_waiting_fence.store(figures.retired_chunks_waiting_fence, kRelaxed);
  counters.dead_ranks.store(figures.dead_ranks, kRelaxed);
  counters.jobs_completed.store(figures.jobs_completed, kRelaxed);
  counters.jobs_failed.store(figures.jobs_failed, kRelaxed);
  counters.reports_applied.store(figures.reports_applied, kRelaxed);
  counters.reports_rejected.store(figures.reports_rejected, kRelaxed);
}

SchedulerFigures load_figures(const SchedulerCounters& counters) {
  SchedulerFigures figures;
  figures.pinned_chunks = counters.pinned_chunks.load(kRelaxed);
  figures.jobs_waiting_quorum = counters.jobs_waiting_quorum.load(kRelaxed);
  figures.retired_chunks_waiting_fence = counters.retired_chunks_waiting_fence.load(kRelaxed);
  figures.dead_ranks = counters.dead_ranks.load(kRelaxed);
  figures.jobs_completed = counters.jobs_completed.load(kRelaxed);
  figures.jobs_failed = counters.jobs_failed.load(kRelaxed);
  figures.reports_applied = counters.reports_applied.load(kRelaxed);
  figures.reports_rejected = counters.reports_rejected.load(kRelaxed);
  return figures;
}

}  // namespace

void write_scheduler_figures(SchedulerCounters& counters, const SchedulerFigures& figures) {
  const uint64_t version = counters.version.load(kRelaxed);  // one writer: no one else moves it
  const uint64_t odd = version % 2 == 0 ? version + 1 : version + 2;  // odd: a writer died mid-write
  counters.version.store(odd, kRelaxed);
  // Release fence: the odd version is visible before any figure below (pairs with the acquire
  // fence in read_scheduler_figures).
  std::atomic_thread_fence(std::memory_order_release);
  store_figures(counters, figures);
  counters.updated_ns.store(monotonic_ns(), kRelaxed);
  // Release: every figure above is visible before the even version (pairs with the acquire load
  // of `version` in read_scheduler_figures).
  counters.version.store(odd + 1, std::memory_order_release);
}

SchedulerReading read_scheduler_figures(const SchedulerCounters& counters) {
  SchedulerReading reading;
  for (int attempt = 0; attempt < 100; ++attempt) {
    // Acquire pairs with the release store of the even version in write_scheduler_figures.
    const uint64_t before = counters.version.load(std::memory_order_acquire);
    reading.figures = load_figures(counters);
    reading.updated_ns = counters.updated_ns.load(kRelaxed);
    // Acquire fence: the figures above are read before `version` is read again (pairs with the
    // release fence in write_scheduler_figures).
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t after = counters.version.load(kRelaxed);
    reading.consistent = before == after && before % 2 == 0;
    if (reading.consistent) return reading;
    cpu_relax();
  }
  return reading;  // a writer is stuck mid-write (or died there): say so rather than wait
}

}  // namespace hugepin
