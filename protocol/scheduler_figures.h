// The scheduler's figures, each listed once. Everything else is generated from the two lists
// below: SchedulerFigures (what OffloadScheduler::figures() returns), and for the published ones
// PublishedFigures and SchedulerCounters (the copy in the control segment, and its writer and
// reader: ipc/scheduler_counters.h), the copy from one to the other (session/published_figures.h),
// the metrics (ipc/metrics.cc) and hugepin inspect's scheduler line and JSON (cli/inspect_view.cc).
//
// Adding a figure: one row here, and its value in OffloadScheduler::figures(). A published one
// changes the control segment's layout: bump kControlLayoutVersion (ipc/control_layout.h) and
// the count checked beside SchedulerCounters.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "protocol/offload_types.h"

namespace hugepin {

using RejectedByVerdict = std::array<uint64_t, kReportVerdicts>;

// X(type, name, help): figures only the scheduler's own process sees (OffloadScheduler::figures(),
// the C API).
#define HUGEPIN_SCHEDULER_OWN_FIGURES(X)                                                           \
  X(uint32_t, ranks, "TP x PP ranks")                                                              \
  X(uint32_t, live_ranks, "ranks whose worker answers")                                            \
  X(uint32_t, unresponsive_ranks, "declared dead, process not yet gone")                           \
  X(uint32_t, exited_ranks, "gone, no replacement attached yet")                                   \
  X(uint32_t, chunks, "chunks of the plan")                                                        \
  X(uint64_t, holds, "holds over all chunks")                                                      \
  X(uint32_t, quarantined_chunks, "held by a job that waits for an unresponsive rank's exit")      \
  X(uint32_t, retired_waiting_holds, "fence passed; a copy still holds them")                      \
  X(uint32_t, reusable_chunks, "ready for take_reusable()")                                        \
  X(uint32_t, jobs_failed_holding, "failed, chunks still held (ranks copying or quarantined)")      \
  X(Epoch, current_epoch, "the scheduler's epoch")                                                 \
  X(Epoch, all_rank_epoch, "every member rank has released this epoch")                            \
  X(uint64_t, jobs_dispatched, "total: jobs dispatched")                                           \
  X(RejectedByVerdict, rejected_by_verdict, "reports refused, by ReportVerdict; [kApplied] is 0")

// X(type, name, kind, help, label): figures the scheduler also publishes, in this order. `name`
// is the field of PublishedFigures and SchedulerCounters (one uint64 each in the control
// segment), the metric hugepin_scheduler_<name> ("_total" added for a counter) with `help` as its
// HELP, and the key in hugepin inspect --json; `label` names the value on inspect's scheduler
// line.
#define HUGEPIN_PUBLISHED_FIGURES(X)                                                                         \
  X(uint32_t, pinned_chunks, kGauge, "Chunks holding at least one copy pin.", "pinned chunks")               \
  X(uint32_t, jobs_waiting_quorum, kGauge, "Copy jobs not yet reported complete by every rank.",             \
    "jobs waiting for quorum")                                                                               \
  X(uint32_t, retired_chunks_waiting_fence, kGauge, "Retired chunks waiting for the compute fence.",          \
    "retired chunks waiting on the fence")                                                                   \
  X(uint32_t, dead_ranks, kGauge, "Ranks whose worker died and was not replaced.", "dead ranks")             \
  X(uint64_t, jobs_completed, kCounter, "Copy jobs that reached quorum.", "jobs completed")                  \
  X(uint64_t, jobs_failed, kCounter, "Copy jobs that can never reach quorum.", "failed")                     \
  X(uint64_t, reports_applied, kCounter, "Reports the scheduler acted on.", "reports applied")               \
  X(uint64_t, reports_rejected, kCounter, "Reports the scheduler refused.", "rejected")

// Plain values, copyable into a shared counters block. dead_ranks: unresponsive_ranks +
// exited_ranks; reports_rejected: the sum of rejected_by_verdict.
struct SchedulerFigures {
#define HUGEPIN_OWN_FIELD(type, name, help) type name{};
#define HUGEPIN_PUBLISHED_FIELD(type, name, kind, help, label) type name{};
  HUGEPIN_SCHEDULER_OWN_FIGURES(HUGEPIN_OWN_FIELD)
  HUGEPIN_PUBLISHED_FIGURES(HUGEPIN_PUBLISHED_FIELD)
#undef HUGEPIN_OWN_FIELD
#undef HUGEPIN_PUBLISHED_FIELD
};

enum class FigureKind : uint8_t { kGauge, kCounter };

struct PublishedFigure {
  std::string_view name;
  FigureKind kind;
  std::string_view help;
  std::string_view label;
};

inline constexpr PublishedFigure kPublishedFigures[] = {
#define HUGEPIN_FIGURE_ROW(type, name, kind, help, label) {#name, FigureKind::kind, help, label},
    HUGEPIN_PUBLISHED_FIGURES(HUGEPIN_FIGURE_ROW)
#undef HUGEPIN_FIGURE_ROW
};

}  // namespace hugepin
