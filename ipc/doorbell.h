// A futex doorbell in shared memory: a waiter sleeps until the state it waits for is published,
// and a waker makes a system call only when someone sleeps.
//
// The protocol is Dekker's, made asymmetric so that the waker's fast path has no fence. A waker
// publishes its state (a ring index), then reads `sleepers` and, when it is not zero, bumps `word`
// and wakes. A waiter reads `word`, counts itself in `sleepers`, issues the heavy barrier, checks
// the state and only then sleeps on `word`. The heavy barrier is membarrier(2)
// MEMBARRIER_CMD_GLOBAL_EXPEDITED: every CPU running a thread of a process registered for it runs
// a full memory barrier before the call returns. So either the waker's read of `sleepers` comes
// after that barrier and sees the waiter, or its publication came before it and the waiter's check
// sees the state; and a bump between the waiter's read of `word` and its sleep makes FUTEX_WAIT
// return at once. No wake-up is lost, and a waker on the fast path pays one plain load.
//
// Wakers in a process the kernel will not register (an old kernel, a seccomp filter) publish with
// a seq_cst store and read `sleepers` with seq_cst, which pairs with the waiter's seq_cst
// increment (Dekker's symmetric form). A waiter whose heavy barrier fails cannot rely on
// registered wakers, so it sleeps at most kUnfencedSleepNs at a time and re-checks: a wake-up is
// then at worst that late, never lost for good.
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

// How long a waiter without the heavy barrier sleeps before it re-checks.
inline constexpr int64_t kUnfencedSleepNs = 1'000'000;

// CLOCK_MONOTONIC in ns (the clock of Report::time_ns and every timeout here).
int64_t monotonic_ns();

// Spins one iteration politely (the x86 `pause` instruction).
void cpu_relax();

namespace detail {
// 0: not asked yet in this process; 1: registered for the heavy barrier; -1: refused.
extern std::atomic<int> asymmetric_barrier_state;
int register_asymmetric_barrier(Os& os);
}  // namespace detail

// Whether wakers in this process may publish with a plain release store: true once the process is
// registered for the heavy barrier (on first use, again after a fork), false when the kernel
// refuses (then they publish with seq_cst).
inline bool asymmetric_barrier_registered(Os& os) {
  int state = detail::asymmetric_barrier_state.load(std::memory_order_relaxed);
  if (state == 0) state = detail::register_asymmetric_barrier(os);
  return state > 0;
}

// Stores `value` as a waker publishes the state waiters wait for (two branches, because compilers
// turn a memory order known only at run time into seq_cst).
inline void publish(Os& os, std::atomic<uint64_t>& state, uint64_t value) {
  if (asymmetric_barrier_registered(os)) {
    state.store(value, std::memory_order_release);
  } else {
    state.store(value, std::memory_order_seq_cst);
  }
}

// Forgets whether this process is registered: the next publish asks the kernel again
// (a fork's child does this; tests use it to play a kernel that refuses).
void forget_asymmetric_barrier();

struct alignas(kCacheLinePair) Doorbell {
  std::atomic<uint32_t> word{0};      // the futex word: bumped by every ring that had a sleeper
  std::atomic<uint32_t> sleepers{0};  // waiters between counting themselves and waking up

  // Wakes every waiter, if there is one. REQUIRES: the caller just published the state waiters
  // wait for with publish().
  void ring(Os& os) {
    // The compiler keeps this read after the caller's publication; the CPU may not, which the
    // waiter's heavy barrier covers (or, unregistered, the seq_cst publication and this seq_cst
    // read pair with the waiter's seq_cst increment). See the file comment.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) != 0) wake(os);
  }

  // Returns true as soon as `ready()` does, false when `timeout_ns` (negative: no limit) passes
  // first. `ready` must read the state with seq_cst loads; it may be called many times.
  template <typename Ready>
  bool wait(Os& os, Ready&& ready, int64_t timeout_ns);

 private:
  // Bumps `word` and wakes every waiter.
  void wake(Os& os);
  // The heavy barrier; false when the kernel refuses it.
  static bool heavy_barrier(Os& os);
};

template <typename Ready>
bool Doorbell::wait(Os& os, Ready&& ready, int64_t timeout_ns) {
  if (ready()) return true;
  const int64_t deadline = timeout_ns < 0 ? -1 : monotonic_ns() + timeout_ns;
  for (;;) {
    // Acquire pairs with the release bump of `word` in ring().
    const uint32_t seen = word.load(std::memory_order_acquire);
    // seq_cst pairs with the seq_cst read in ring() of wakers that cannot elide their barrier.
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    const bool fenced = heavy_barrier(os);  // orders the count above against every waker's read
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
    if (!fenced && (remaining < 0 || remaining > kUnfencedSleepNs)) remaining = kUnfencedSleepNs;
    os.futex_wait(&word, seen, remaining);  // woken, spurious, EAGAIN, EINTR, timed out: re-check
    sleepers.fetch_sub(1, std::memory_order_relaxed);
    if (ready()) return true;
  }
}

static_assert(sizeof(Doorbell) == kCacheLinePair);

}  // namespace hugepin
