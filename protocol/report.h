// A report from a worker rank to the scheduler: the one record type the rings carry.
//
// 32 bytes, fixed layout, no pointers: it lives in shared memory between processes of one
// machine (same endianness), and its layout is part of the control segment's layout version.
#pragma once

#include <cstdint>
#include <type_traits>

namespace hugepin {

enum class ReportKind : uint16_t {
  kCopyComplete = 1,    // value: job id; every chunk of the job is copied on this rank
  kCopyFailed = 2,      // value: job id; the copy failed on this rank (flags: an errno)
  kComputeRelease = 3,  // value: epoch; all GPU work of this rank up to that epoch is done
  kAttach = 4,          // value: pid of the worker that attached
  kDetach = 5,          // value: pid of the worker that detached
  kHeartbeat = 6,       // value: the worker's monotonic time in ns
};

struct Report {
  ReportKind kind;
  uint16_t rank;      // flat rank: pp_rank * tp + tp_rank
  uint32_t flags;     // kind-specific (kCopyFailed: errno)
  uint64_t sequence;  // the record's count on its ring, from 1, written by the ring (ipc/report_ring.h)
  uint64_t value;     // job id, epoch or pid, by kind
  uint64_t time_ns;   // CLOCK_MONOTONIC when posted
};

static_assert(sizeof(Report) == 32, "Report is 32 bytes: two per cache line");
static_assert(std::is_trivially_copyable_v<Report>, "Report is copied through shared memory");

// The flat rank of (tp_rank, pp_rank) in a TP x PP layout, as vLLM numbers ranks.
constexpr uint32_t flat_rank(uint32_t tp_rank, uint32_t pp_rank, uint32_t tp) { return pp_rank * tp + tp_rank; }

}  // namespace hugepin
