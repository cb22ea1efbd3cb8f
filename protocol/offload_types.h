// The vocabulary of the scheduler-side offload protocol: chunk and job ids, epochs, job kinds,
// rank states, and what becomes of a report (applied, or rejected and why).
//
// Header-only; shared by copy_pins.h, completion_quorum.h, retirement_fence.h and
// offload_scheduler.h.
#pragma once

#include <cstdint>
#include <string>

#include "base/error.h"

namespace hugepin {

// A chunk index, the same on every rank (the plan's common chunk count).
using ChunkId = uint32_t;
// A copy job: ids start at 1, increase, and are never reused by one scheduler.
using JobId = uint64_t;
// A compute epoch of the engine: the scheduler's count of closed steps, from 1.
using Epoch = uint64_t;

// The most ranks (TP x PP) one scheduler serves: one node's GPUs, with a wide margin.
inline constexpr uint32_t kMaxRanks = 1024;

enum class JobKind : uint8_t {
  kLoad = 0,   // host -> GPU: ranks read the chunks
  kStore = 1,  // GPU -> host: ranks write the chunks
};

enum class RankLiveness : uint8_t {
  kLive = 0,          // reports are applied
  kUnresponsive = 1,  // declared dead; its process may still copy: its reports are rejected
  kExited = 2,        // its process is confirmed gone; a replacement may attach
};

// What apply() did with a report. Everything but kApplied is a rejection: counted, nothing else
// changes.
enum class ReportVerdict : uint8_t {
  kApplied = 0,
  kUnknownRank,         // rank >= TP x PP
  kUnknownKind,         // not a ReportKind this scheduler knows
  kRankNotLive,         // the rank was declared unresponsive or has exited
  kRankNotExited,       // attach for a rank whose previous process is not confirmed gone
  kSequenceReplay,      // sequence not above the last applied report of that rank
  kUnknownJob,          // never dispatched, or already settled
  kDuplicate,           // this rank already reported this job
  kEpochNotAdvancing,   // compute-release at or below the rank's last one
  kEpochNotClosed,      // compute-release for the current epoch or a later one
};
inline constexpr int kReportVerdicts = 10;

inline const char* verdict_name(ReportVerdict verdict) {
  switch (verdict) {
    case ReportVerdict::kApplied: return "applied";
    case ReportVerdict::kUnknownRank: return "unknown_rank";
    case ReportVerdict::kUnknownKind: return "unknown_kind";
    case ReportVerdict::kRankNotLive: return "rank_not_live";
    case ReportVerdict::kRankNotExited: return "rank_not_exited";
    case ReportVerdict::kSequenceReplay: return "sequence_replay";
    case ReportVerdict::kUnknownJob: return "unknown_job";
    case ReportVerdict::kDuplicate: return "duplicate";
    case ReportVerdict::kEpochNotAdvancing: return "epoch_not_advancing";
    case ReportVerdict::kEpochNotClosed: return "epoch_not_closed";
  }
  return "invalid";
}

inline const char* job_kind_name(JobKind kind) { return kind == JobKind::kLoad ? "load" : "store"; }

inline const char* rank_liveness_name(RankLiveness state) {
  switch (state) {
    case RankLiveness::kLive: return "live";
    case RankLiveness::kUnresponsive: return "unresponsive";
    case RankLiveness::kExited: return "exited";
  }
  return "invalid";
}

// "rank 5 (tp_rank 1, pp_rank 1)": a flat rank with its coordinates, for messages.
inline std::string describe_rank(uint32_t rank, uint32_t tp) {
  return cat("rank ", rank, " (tp_rank ", rank % tp, ", pp_rank ", rank / tp, ")");
}

}  // namespace hugepin
