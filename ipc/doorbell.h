// A futex doorbell in shared memory: a waiter sleeps until the state it waits for is published,
// and a waker makes a system call only when someone sleeps.
//
// The protocol is Dekker's. The waker publishes its state with a seq_cst store, then reads
// `sleepers` (seq_cst) and, when it is not zero, bumps `word` and wakes. The waiter reads `word`,
// counts itself in `sleepers` (seq_cst), checks the state (seq_cst load) and only then sleeps on
// `word`. In the single total order of seq_cst operations either the waiter's check sees the new
// state, or the waker's read of `sleepers` sees the waiter; and a bump between the waiter's read
// of `word` and its sleep makes FUTEX_WAIT return at once. No wake-up is lost, and a waker on the
// fast path (nobody asleep) pays one load.
//
// Thread-safety: any number of wakers and waiters, in any processes that map the doorbell.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/os.h"

namespace hugepin {

// Two cache lines: x86's adjacent-line prefetcher moves lines in pairs, so anything another core
// writes is kept 128 bytes away (DPDK's RTE_CACHE_GUARD does the same).
inline constexpr size_t kCacheLinePair = 128;

// CLOCK_MONOTONIC in ns (the clock of Report::time_ns and every timeout here).
int64_t monotonic_ns();

// Spins one iteration politely (the x86 `pause` instruction).
void cpu_relax();

struct alignas(kCacheLinePair) Doorbell {
  std::atomic<uint32_t> word{0};      // the futex word: bumped by every ring that had a sleeper
  std::atomic<uint32_t> sleepers{0};  // waiters between counting themselves and waking up

  // Wakes every waiter, if there is one. REQUIRES: the caller published the state waiters wait
  // for with a seq_cst store before calling.
  void ring(Os& os);

  // Returns true as soon as `ready()` does, false when `timeout_ns` (negative: no limit) passes
  // first. `ready` must read the state with seq_cst loads; it may be called many times.
  template <typename Ready>
  bool wait(Os& os, Ready&& ready, int64_t timeout_ns);
};

template <typename Ready>
bool Doorbell::wait(Os& os, Ready&& ready, int64_t timeout_ns) {
  if (ready()) return true;
  const int64_t deadline = timeout_ns < 0 ? -1 : monotonic_ns() + timeout_ns;
  for (;;) {
    // Acquire pairs with the release bump of `word` in ring().
    const uint32_t seen = word.load(std::memory_order_acquire);
    // seq_cst: ordered before the check below and against the seq_cst read in ring().
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (ready()) {
      sleepers.fetch_sub(1, std::memory_order_relaxed);
      return true;
    }
    int64_t remaining = -1;
    if (deadline >= 0) {
      remaining = deadline - monotonic_ns();
      if (remaining <= 0) {
        sleepers.fetch_sub(1, std::memory_order_relaxed);
        return false;
      }
    }
    os.futex_wait(&word, seen, remaining);  // woken, spurious, EAGAIN, EINTR: all re-check
    sleepers.fetch_sub(1, std::memory_order_relaxed);
    if (ready()) return true;
  }
}

static_assert(sizeof(Doorbell) == kCacheLinePair);

}  // namespace hugepin
