#include "ipc/scheduler_counters.h"

#include "base/cpu_relax.h"

namespace hugepin {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;
// Figures are stored with release and loaded with acquire: a reader that sees any figure of a
// write also sees the odd version stored before it, so its second read of the version cannot
// pass for the first (a seqlock without fences, which ThreadSanitizer does not model).
constexpr auto kRelease = std::memory_order_release;
constexpr auto kAcquire = std::memory_order_acquire;

void store_figures(SchedulerCounters& counters, const PublishedFigures& figures) {
#define HUGEPIN_STORE_FIGURE(type, name, kind, help, label) counters.name.store(figures.name, kRelease);
  HUGEPIN_PUBLISHED_FIGURES(HUGEPIN_STORE_FIGURE)
#undef HUGEPIN_STORE_FIGURE
}

PublishedFigures load_figures(const SchedulerCounters& counters) {
  PublishedFigures figures;
#define HUGEPIN_LOAD_FIGURE(type, name, kind, help, label) figures.name = counters.name.load(kAcquire);
  HUGEPIN_PUBLISHED_FIGURES(HUGEPIN_LOAD_FIGURE)
#undef HUGEPIN_LOAD_FIGURE
  return figures;
}

}  // namespace

void write_scheduler_figures(SchedulerCounters& counters, const PublishedFigures& figures, int64_t now_ns) {
  const uint64_t version = counters.version.load(kRelaxed);  // one writer: no one else moves it
  const uint64_t odd = version % 2 == 0 ? version + 1 : version + 2;  // odd: a writer died mid-write
  counters.version.store(odd, kRelaxed);
  // Each figure's release store pairs with its acquire load in load_figures: the odd version
  // above is visible to any reader that sees a figure below.
  store_figures(counters, figures);
  counters.updated_ns.store(now_ns, kRelease);
  // Release: every figure above is visible before the even version (pairs with the acquire load
  // of `version` in read_scheduler_figures).
  counters.version.store(odd + 1, std::memory_order_release);
}

SchedulerReading read_scheduler_figures(const SchedulerCounters& counters) {
  SchedulerReading reading;
  for (int attempt = 0; attempt < 100; ++attempt) {
    // Acquire pairs with the release store of the even version in write_scheduler_figures.
    const uint64_t before = counters.version.load(std::memory_order_acquire);
    reading.figures = load_figures(counters);  // acquire: the read of `version` below stays after them
    reading.updated_ns = counters.updated_ns.load(kAcquire);  // pairs with its release store in the writer
    const uint64_t after = counters.version.load(kRelaxed);
    reading.consistent = before == after && before % 2 == 0;
    if (reading.consistent) return reading;
    cpu_relax();
  }
  return reading;  // a writer is stuck mid-write (or died there): say so rather than wait
}

}  // namespace hugepin
