// A futex doorbell in shared memory: a waiter sleeps until the state it waits for is published,
// and a waker makes a system call only when someone sleeps.
//
// The protocol is Dekker's, made asymmetric so that the waker's fast path has no fence. A waker
// publishes its state (a ring index) with a plain release store, then reads `sleepers` and, when
// it is not zero, bumps `word` and wakes. A waiter reads `word`, counts itself in `sleepers`,
// issues the heavy barrier, checks the state and only then sleeps on `word`. The heavy barrier is
// membarrier(2) MEMBARRIER_CMD_GLOBAL_EXPEDITED: every CPU running a thread of a process
// registered for it runs a full memory barrier before the call returns. So either the waker's
// read of `sleepers` comes after that barrier and sees the waiter, or its publication came before
// it and the waiter's check sees the state; and a bump between the waiter's read of `word` and its
// sleep makes FUTEX_WAIT return at once. No wake-up is lost, and a waker pays one plain load.
//
// Where the kernel will not register a process (an old kernel, a seccomp filter, a sandbox), its
// wakers still publish with a plain release store: a StoreLoad fence on every push would cost
// more than the whole rest of it (measured: 0.6-0.7x the rings' rate). Instead such a waker marks
// the doorbell once (`unfenced_wakers`, with a full fence), and every waiter that sees the mark,
// or whose own heavy barrier fails, sleeps at most kUnfencedSleepNs at a time and re-checks. A
// wake-up is then rarely late (only when a publication races the waiter's check) and never lost.
// The mark and `sleepers` are themselves a symmetric Dekker pair: a waiter that missed the mark
// was counted before the waker's fenced first look at `sleepers`, so that look wakes it, and its
// next round sees the mark.
//
// The heavy barrier has been seen to fail that promise, or this protocol has a flaw not found yet:
// on the development VM (Linux 6.18 under Firecracker, 2 CPUs), `ipc_ring_stress_thread_test`
// hung about once in a hundred runs under load, a producer asleep with no timeout on its ring's
// space doorbell while the ring was empty (head = tail, `sleepers` 1, `word` never bumped after it
// went to sleep): a wake-up lost. The barrier does run there (3.9 us a call with a thread of the
// process on the other CPU, against 0.15 us before registering). So a fenced waiter's sleeps are
// bounded too, by kFencedSleepNs: a lost wake-up costs at most that, never a hang (a full ring's
// producer used to wait out its whole timeout and fail).
//
// Thread-safety: any number of wakers and waiters, in any processes that map the doorbell.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/cpu_relax.h"
#include "base/os.h"

namespace hugepin {

// Two cache lines: x86's adjacent-line prefetcher moves lines in pairs, so anything another core
// writes is kept 128 bytes away (DPDK's RTE_CACHE_GUARD does the same).
inline constexpr size_t kCacheLinePair = 128;

// How long a waiter sleeps at most before it re-checks: when the heavy barrier does not cover every
// waker (a late wake-up is then expected now and then), and when it does (a wake-up lost against
// its promise, see the file comment, which no waiter may wait on for longer).
inline constexpr int64_t kUnfencedSleepNs = 1'000'000;
inline constexpr int64_t kFencedSleepNs = 10'000'000;

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

namespace detail {
// 0: not asked yet in this process; 1: registered for the heavy barrier; -1: refused.
extern std::atomic<int> asymmetric_barrier_state;
int register_asymmetric_barrier(Os& os);
}  // namespace detail

// Whether waiters' heavy barriers reach this process: true once it is registered (on first use,
// again after a fork), false when the kernel refuses (then its wakers mark the doorbells they ring).
inline bool asymmetric_barrier_registered(Os& os) {
  int state = detail::asymmetric_barrier_state.load(std::memory_order_relaxed);
  if (state == 0) state = detail::register_asymmetric_barrier(os);
  return state > 0;
}

// Forgets whether this process is registered: the next ring asks the kernel again
// (a fork's child does this; tests use it to play a kernel that refuses).
void forget_asymmetric_barrier();

struct alignas(kCacheLinePair) Doorbell {
  std::atomic<uint32_t> word{0};      // the futex word: bumped by every ring that had a sleeper
  std::atomic<uint32_t> sleepers{0};  // waiters between counting themselves and waking up
  // Not 0 once a waker in a process the heavy barrier does not reach has rung (never cleared).
  std::atomic<uint32_t> unfenced_wakers{0};

  // Wakes every waiter, if there is one. REQUIRES: the caller just published the state waiters
  // wait for (a release store; an order of stores, not checked).
  void ring(Os& os) {
    // The compiler keeps this read after the caller's publication; the CPU may not, which the
    // waiter's heavy barrier covers, or in an unregistered process the mark and the bounded sleep
    // (see the file comment).
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (!asymmetric_barrier_registered(os)) [[unlikely]] mark_unfenced_waker();
    if (sleepers.load(std::memory_order_seq_cst) != 0) wake(os);
  }

  // Returns true as soon as `ready()` does, false when `timeout_ns` (negative: no limit) passes
  // first. `ready` must read the state with seq_cst loads; it may be called many times.
  template <typename Ready>
  bool wait(Os& os, Ready&& ready, int64_t timeout_ns);

 private:
  // Bumps `word` and wakes every waiter.
  void wake(Os& os);
  // Sets `unfenced_wakers` if it is not set yet, with a full fence (seq_cst: pairs with the
  // waiter's seq_cst increment of `sleepers` and its seq_cst load of the mark).
  void mark_unfenced_waker();
  // The heavy barrier; false when the kernel refuses it.
  static bool heavy_barrier(Os& os);
};

template <typename Ready>
bool Doorbell::wait(Os& os, Ready&& ready, int64_t timeout_ns) {
  if (ready()) return true;
  const int64_t deadline = deadline_after(os, timeout_ns);
  for (;;) {
    // Acquire pairs with the release bump of `word` in ring().
    const uint32_t seen = word.load(std::memory_order_acquire);
    // seq_cst pairs with the mark and the read of `sleepers` in ring() by unregistered wakers.
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    // The barrier orders the count above against every registered waker's read of it; the mark
    // (seq_cst, read after the count) says whether an unregistered waker may miss it.
    const bool fenced = heavy_barrier(os) && unfenced_wakers.load(std::memory_order_seq_cst) == 0;
    if (ready()) {
      sleepers.fetch_sub(1, std::memory_order_relaxed);
      return true;
    }
    int64_t remaining = time_left(os, deadline);
    if (remaining == 0) {
      sleepers.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    const int64_t longest = fenced ? kFencedSleepNs : kUnfencedSleepNs;
    if (remaining < 0 || remaining > longest) remaining = longest;
    os.futex_wait(&word, seen, remaining);  // woken, spurious, EAGAIN, EINTR, timed out: re-check
    sleepers.fetch_sub(1, std::memory_order_relaxed);
    if (ready()) return true;
  }
}

static_assert(sizeof(Doorbell) == kCacheLinePair);

}  // namespace hugepin
