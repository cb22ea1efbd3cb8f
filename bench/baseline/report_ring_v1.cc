// BASELINE: see report_ring_v1.h. The code of ipc/report_ring.cc and ipc/doorbell.{h,cc} at
// commit 9389e86, cut to the benchmark's calls; comments on ordering as they were.
#include "bench/baseline/report_ring_v1.h"

#include <linux/membarrier.h>
#include <pthread.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>
#include <new>

#include "base/contract.h"

namespace hugepin::bench::baseline {
namespace {

constexpr uint64_t kMagicV1 = 0x31474e4952504848;  // "HHPRING1"

void copy_in(Report* slots, uint32_t capacity, uint32_t first, const Report* records, uint32_t n) {
  if (n == 1) {
    slots[first] = records[0];
    return;
  }
  const uint32_t until_end = std::min(n, capacity - first);
  std::memcpy(static_cast<void*>(slots + first), records, until_end * sizeof(Report));
  std::memcpy(static_cast<void*>(slots), records + until_end, (n - until_end) * sizeof(Report));
}

void copy_out(const Report* slots, uint32_t capacity, uint32_t first, Report* out, uint32_t n) {
  if (n == 1) {
    out[0] = slots[first];
    return;
  }
  const uint32_t until_end = std::min(n, capacity - first);
  std::memcpy(out, slots + first, until_end * sizeof(Report));
  std::memcpy(out + until_end, slots, (n - until_end) * sizeof(Report));
}

// 0: not asked yet in this process; 1: registered; -1: refused.
std::atomic<int> membarrier_state{0};

}  // namespace

bool registered_for_membarrier(Os& os) {
  int state = membarrier_state.load(std::memory_order_relaxed);
  if (state != 0) return state > 0;
  static std::once_flag fork_handler;
  std::call_once(fork_handler, [] {
    pthread_atfork(nullptr, nullptr, [] { membarrier_state.store(0, std::memory_order_relaxed); });
  });
  state = os.membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0 ? 1 : -1;
  membarrier_state.store(state, std::memory_order_relaxed);
  return state > 0;
}

static_assert(sizeof(ReportRingV1) % kCacheLinePair == 0);

void DoorbellV1::wake(Os& os) {
  word.fetch_add(1, std::memory_order_release);
  os.futex_wake(&word, INT_MAX);
}

size_t ReportRingV1::memsize(uint32_t capacity) {
  if (capacity < 2 || (capacity & (capacity - 1)) != 0) return 0;
  const size_t bytes = sizeof(ReportRingV1) + static_cast<size_t>(capacity) * sizeof(Report);
  return (bytes + kCacheLinePair - 1) / kCacheLinePair * kCacheLinePair;
}

ReportRingV1::ReportRingV1(uint32_t capacity)
    : magic_(kMagicV1),
      capacity_(capacity),
      record_bytes_(sizeof(Report)),
      data_doorbell_offset_(static_cast<int64_t>(offsetof(ReportRingV1, own_data_doorbell_))),
      first_index_(0),
      tail_(0),
      cached_head_(0),
      head_(0),
      cached_tail_(0) {}

ReportRingV1* ReportRingV1::init(void* memory, uint32_t capacity) {
  HUGEPIN_REQUIRE(memsize(capacity) != 0, "capacity ", capacity);
  HUGEPIN_REQUIRE(reinterpret_cast<uintptr_t>(memory) % kCacheLinePair == 0, "memory at ", memory);
  auto* ring = new (memory) ReportRingV1(capacity);
  std::memset(static_cast<void*>(ring->slots()), 0, static_cast<size_t>(capacity) * sizeof(Report));
  return ring;
}

uint32_t ReportRingV1::push_batch(Os& os, const Report* records, uint32_t count) {
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  uint64_t used = tail - cached_head_;
  if (capacity_ - std::min<uint64_t>(used, capacity_) < count) {
    // Acquire pairs with the release (or seq_cst) store of head_ in pop_batch.
    cached_head_ = head_.load(std::memory_order_acquire);
    used = tail - cached_head_;
  }
  const uint32_t room = capacity_ - static_cast<uint32_t>(std::min<uint64_t>(used, capacity_));
  const uint32_t n = std::min(count, room);
  if (n == 0) return 0;
  copy_in(slots(), capacity_, static_cast<uint32_t>(tail) & (capacity_ - 1), records, n);
  // Release pairs with the acquire load of tail_ in pop_batch.
  publish_v1(os, tail_, tail + n);
  data_doorbell().ring(os);
  return n;
}

uint32_t ReportRingV1::pop_batch(Os& os, Report* out, uint32_t max) {
  const uint64_t head = head_.load(std::memory_order_relaxed);
  uint64_t available = cached_tail_ - head;
  if (available < max) {
    // Acquire pairs with the release (or seq_cst) store of tail_ in push_batch.
    cached_tail_ = tail_.load(std::memory_order_acquire);
    available = cached_tail_ - head;
  }
  const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>({available, max, capacity_}));
  if (n == 0) return 0;
  copy_out(slots(), capacity_, static_cast<uint32_t>(head) & (capacity_ - 1), out, n);
  // Release pairs with the acquire load of head_ in push_batch.
  publish_v1(os, head_, head + n);
  space_doorbell_.ring(os);
  return n;
}

}  // namespace hugepin::bench::baseline
