// BASELINE, for bench/ring_bench.cc only: ReportRing as it was before the ring work of issue 16
// (ipc/report_ring.{h,cc} and the doorbell's publish() at commit 9389e86), so that
// `hugepin bench ring` measures the old ring, the current one and Boost.Lockfree in one run.
//
// Only what the benchmark calls is kept: memsize, init, push_batch and pop_batch, with the same
// layout and the same code as then: out of line, and publishing each index with a release store
// in a process registered for membarrier(2) but with a seq_cst store in one the kernel refuses.
// Nothing in hugepin uses it; do not fix it: it is the "before" of a comparison.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/os.h"
#include "ipc/doorbell.h"
#include "protocol/report.h"

namespace hugepin::bench::baseline {

// The doorbell's waker side as it was (inline, as then): the data layout of ipc/doorbell.h's
// Doorbell then.
struct alignas(kCacheLinePair) DoorbellV1 {
  std::atomic<uint32_t> word{0};
  std::atomic<uint32_t> sleepers{0};

  // REQUIRES: the caller just published with publish_v1() (an order of stores, not checked).
  void ring(Os& os) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) != 0) wake(os);
  }
  void wake(Os& os);
};

// Whether this process is registered for membarrier(2) MEMBARRIER_CMD_GLOBAL_EXPEDITED: asked
// of the kernel once per process (again in a fork's child), as ipc/doorbell.h did then. The
// current doorbell does without it (ipc/doorbell.h says why).
bool registered_for_membarrier(Os& os);

// The publication as it was (inline, as then): seq_cst unless this process is registered for the
// heavy barrier.
inline void publish_v1(Os& os, std::atomic<uint64_t>& state, uint64_t value) {
  if (registered_for_membarrier(os)) {
    state.store(value, std::memory_order_release);
  } else {
    state.store(value, std::memory_order_seq_cst);
  }
}

class ReportRingV1 {
 public:
  // Bytes a ring of `capacity` records needs, or 0 when capacity is not a power of two >= 2.
  static size_t memsize(uint32_t capacity);
  // REQUIRES: memory is 128-byte aligned and holds memsize(capacity) bytes, memsize(capacity) != 0.
  static ReportRingV1* init(void* memory, uint32_t capacity);

  ReportRingV1(const ReportRingV1&) = delete;
  ReportRingV1& operator=(const ReportRingV1&) = delete;

  // As ReportRing::push_batch / pop_batch (one producer, one consumer).
  uint32_t push_batch(Os& os, const Report* records, uint32_t count);
  uint32_t pop_batch(Os& os, Report* out, uint32_t max);

 private:
  explicit ReportRingV1(uint32_t capacity);
  Report* slots() { return reinterpret_cast<Report*>(reinterpret_cast<std::byte*>(this) + sizeof(ReportRingV1)); }
  DoorbellV1& data_doorbell() {
    return *reinterpret_cast<DoorbellV1*>(reinterpret_cast<std::byte*>(this) + data_doorbell_offset_);
  }

  uint64_t magic_;
  uint32_t capacity_;
  uint32_t record_bytes_;
  int64_t data_doorbell_offset_;
  uint64_t first_index_;

  alignas(kCacheLinePair) std::atomic<uint64_t> tail_;
  uint64_t cached_head_;

  alignas(kCacheLinePair) std::atomic<uint64_t> head_;
  uint64_t cached_tail_;

  DoorbellV1 own_data_doorbell_;
  DoorbellV1 space_doorbell_;
  // capacity_ Reports follow.
};

}  // namespace hugepin::bench::baseline
