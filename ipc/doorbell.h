// A futex doorbell in shared memory: a waiter sleeps until the state it waits for is published,
// and a waker makes a system call only when someone sleeps.
//
// The protocol is Dekker's, symmetric: a waker publishes its state (a ring index, a release
// store), issues a full fence and reads `sleepers`; only when that is not zero does it bump `word`
// and wake. A waiter reads `word`, counts itself in `sleepers` (a seq_cst read-modify-write: its
// fence), checks the state (seq_cst loads) and only then sleeps on `word`. Either the waker's
// fence comes first in the single order of seq_cst operations, and the waiter's check sees the state, or the
// waiter's count comes first, and the waker's read sees the sleeper; a bump between the waiter's
// read of `word` and its sleep makes FUTEX_WAIT return at once. No wake-up is lost, on any kernel,
// and a waiter needs nothing of the kernel but the futex. (That is ring() and wait(); the unfenced
// pair below trades it for bounded re-checks.)
//
// It was asymmetric until the eleventh session: the waker read `sleepers` with no fence and the
// waiter paid with membarrier(2) MEMBARRIER_CMD_GLOBAL_EXPEDITED, which promises a full barrier on
// every CPU running a thread of a registered process. Linux keeps that promise only for CPUs whose
// run queue learned of the registration, which it does at a switch from another process's memory
// map; a CPU that idled with the process's map kept lazily when it registered (a thread of it
// asleep there, or its main thread just moved away) never learns, for as long as it runs only that
// process, kernel threads and idle. Seen on Linux 6.18 (the development VM) with
// bench/probes/membarrier_reach.c: registered while a thread of the process slept on the other
// CPU, 5 of 5 trials sent that CPU no interrupt in 20000 barriers (0.15-0.24 us each, as
// unregistered); registered first, before the thread started, 2 of 5 missed too (the process had
// run on that CPU before it pinned itself), the others cost 4.8 us and an interrupt a barrier;
// on the GPU host (Linux 6.18, 16 vCPUs) 4 of 4 and 0 of 4.
// A waker on such a CPU may read `sleepers` before its publication has left its store buffer,
// and no barrier of the waiter's drains it. The likeliest cause of a hang that
// `ipc_ring_stress_thread_test` showed about once in a hundred runs under load: a producer asleep
// on an empty ring's space doorbell, `sleepers` 1, `word` not bumped. The window is narrow (the
// probe's rounds of the old pair, 200000 a trial, lost none on either machine), so a loss was not
// reproduced on demand. The fence cost the ring 12% of its rate one record at a time and 3% in
// batches of 32 on the development VM (docs/performance.md); the barrier cost each sleep 3.9 us and an interrupt to every CPU running
// a registered process (a spinning rank's too).
//
// A state whose wakers are hot and whose waiters are rare may be rung without the fence
// (ring_unfenced), its waiters then sleeping in bounded slices (wait_rechecking): a missed wake-up
// costs a waiter at most its current slice. A ring's space is such a state (ipc/report_ring.h):
// its consumer frees space on every pop; without that pop's fence the ring's median against
// Boost's queue in batches of 32 on the GPU host rose from 0.96x to 1.40x (twelfth session, 27
// runs alternating: docs/performance.md). The producer's fence, which stays, costs the ring about
// 40% of its rate one record at a time there.
//
// Thread-safety: any number of wakers and waiters, in any processes that map the doorbell.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "base/cpu_relax.h"
#include "base/os.h"

namespace hugepin {

// Two cache lines: x86's adjacent-line prefetcher moves lines in pairs, so anything another core
// writes is kept 128 bytes away (DPDK's RTE_CACHE_GUARD does the same).
inline constexpr size_t kCacheLinePair = 128;

// The moment `timeout_ns` from now on the monotonic clock; -1 (none) for a negative timeout.
inline int64_t deadline_after(Os& os, int64_t timeout_ns) {
  return timeout_ns < 0 ? -1 : os.monotonic_ns() + timeout_ns;
}
// Nanoseconds left until `deadline`: -1 (no limit) when there is none, 0 once it has passed.
inline int64_t time_left(Os& os, int64_t deadline) {
  if (deadline < 0) return -1;
  const int64_t left = deadline - os.monotonic_ns();
  return left > 0 ? left : 0;
}

struct alignas(kCacheLinePair) Doorbell {
  std::atomic<uint32_t> word{0};      // the futex word: bumped by every ring that had a sleeper
  std::atomic<uint32_t> sleepers{0};  // waiters between counting themselves and waking up

  // Wakes every waiter, if there is one. REQUIRES: the caller just published the state waiters
  // wait for (an atomic store; the fence below orders it before the read of `sleepers`).
  void ring(Os& os) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_relaxed) != 0) wake(os);
  }

  // ring() without the fence, for a state whose waiters use wait_rechecking: the caller's
  // publication may still sit in its store buffer when it reads `sleepers`, so a waiter that counts
  // itself just then can be missed and wakes at its next re-check instead. Worth it where the
  // waker is hot and the waiter rare: a ring's consumer frees space on every pop, its producer
  // waits for space only when the consumer fell a whole ring behind.
  void ring_unfenced(Os& os) {
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler keeps the read after the publication
    if (sleepers.load(std::memory_order_relaxed) != 0) wake(os);
  }

  // Returns true as soon as `ready()` does, false when `timeout_ns` (negative: no limit) passes
  // first. `ready` must read the state with seq_cst loads; it may be called many times. Every
  // waker of the state must use ring().
  template <typename Ready>
  bool wait(Os& os, Ready&& ready, int64_t timeout_ns) {
    return sleep_until(os, ready, timeout_ns, /*first_recheck_ns=*/-1);
  }

  // wait() for a state whose wakers may use ring_unfenced(): each sleep is bounded, kFirstRecheckNs
  // at first and twice as long each time after, up to kLastRecheckNs, and the state re-checked
  // after it. A wake-up the waker missed costs at most the sleep it fell into, never a hang.
  template <typename Ready>
  bool wait_rechecking(Os& os, Ready&& ready, int64_t timeout_ns) {
    return sleep_until(os, ready, timeout_ns, kFirstRecheckNs);
  }
  static constexpr int64_t kFirstRecheckNs = 50'000;
  static constexpr int64_t kLastRecheckNs = 5'000'000;

 private:
  // Bumps `word` and wakes every waiter.
  void wake(Os& os);
  // wait() when `first_recheck_ns` is negative, wait_rechecking() otherwise.
  template <typename Ready>
  bool sleep_until(Os& os, Ready& ready, int64_t timeout_ns, int64_t first_recheck_ns);
  // For a waiter of unfenced wakers, counted in `sleepers`, its state not ready: spins up to
  // kLandingSpinNs (not past `deadline`, -1: none; at most kLandingSpinMax polls, should the clock
  // stand still) re-checking it, and returns whether it became ready. An unfenced waker misses
  // this waiter only while its publication sits in its store buffer, which drains in well under a
  // microsecond: the spin finds it there, where a sleep would cost the first re-check (50 us and
  // the timer's slack). Not measured: the window is too narrow to show in a benchmark (and
  // `hugepin bench ring`'s producer spins at a full ring, it never waits for room).
  template <typename Ready>
  static bool landed_while_counted(Os& os, Ready& ready, int64_t deadline) {
    int64_t until = os.monotonic_ns() + kLandingSpinNs;
    if (deadline >= 0) until = std::min(until, deadline);
    for (int polls = 0; polls < kLandingSpinMax && os.monotonic_ns() < until; ++polls) {
      cpu_relax();
      if (ready()) return true;
    }
    return false;
  }
  static constexpr int64_t kLandingSpinNs = 2'000;
  static constexpr int kLandingSpinMax = 4096;
};

template <typename Ready>
bool Doorbell::sleep_until(Os& os, Ready& ready, int64_t timeout_ns, int64_t first_recheck_ns) {
  if (ready()) return true;
  const int64_t deadline = deadline_after(os, timeout_ns);
  int64_t recheck_ns = first_recheck_ns;
  for (;;) {
    // Acquire pairs with the release bump of `word` in wake().
    const uint32_t seen = word.load(std::memory_order_acquire);
    // seq_cst: with `ready`'s seq_cst loads after it, the waiter's half of the Dekker pair whose
    // other half is the fence in ring().
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (ready()) {
      sleepers.fetch_sub(1, std::memory_order_relaxed);
      return true;
    }
    if (recheck_ns >= 0 && landed_while_counted(os, ready, deadline)) {
      sleepers.fetch_sub(1, std::memory_order_relaxed);
      return true;
    }
    const int64_t remaining = time_left(os, deadline);
    if (remaining == 0) {
      sleepers.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    int64_t sleep_ns = remaining;
    if (recheck_ns >= 0) {
      sleep_ns = remaining < 0 ? recheck_ns : std::min(remaining, recheck_ns);
      recheck_ns = std::min(2 * recheck_ns, kLastRecheckNs);
    }
    os.futex_wait(&word, seen, sleep_ns, /*slack_ns=*/0);  // woken, spurious, EAGAIN, EINTR, timed out: re-check
    sleepers.fetch_sub(1, std::memory_order_relaxed);
    if (ready()) return true;
  }
}

static_assert(sizeof(Doorbell) == kCacheLinePair);

}  // namespace hugepin
