// wake_latency_probe [SECONDS]: how late a sleeping thread runs again on this machine, the floor
// under every latency of `hugepin bench offload` that a sleep is part of (a completion watcher
// polling every 50 us, a scheduler asleep until a job can settle). On the H200 host (a virtual
// machine) the slowest 1% of jobs waited 0.1-1.5 ms for a thread that was neither busy nor queued
// for a CPU (docs/performance.md); this measures the machine without hugepin in the way. Not part
// of hugepin.
//
// Three ways, SECONDS each (default 3):
//   timer  clock_nanosleep for 50 us (timer slack 1 us, as the completion watcher sets it): how
//          much later than asked the thread runs;
//   futex  one thread asleep in FUTEX_WAIT, another wakes it at a random moment 20-200 us later:
//          from the waker's stamp just before FUTEX_WAKE to the sleeper running;
//   spin   the same hand-over to a thread that spins on the word instead of sleeping (the floor:
//          a cache line crossing cores).
// Each prints p50, p90, p99, p99.9 and max in us, and the machine's steal time meanwhile.
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "bench/scheduler_stalls.h"

namespace {

int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

using hugepin::bench::MachineCpuTicks;

MachineCpuTicks cpu_ticks() { return hugepin::bench::machine_cpu_ticks(hugepin::real_os()); }

void report(const char* name, std::vector<double> us, const MachineCpuTicks& before) {
  const double steal = 100 * hugepin::bench::steal_share(before, cpu_ticks());
  if (us.empty()) {
    std::printf("%-6s no samples\n", name);
    return;
  }
  std::sort(us.begin(), us.end());
  auto at = [&us](double p) { return us[std::min(us.size() - 1, static_cast<size_t>(p * us.size()))]; };
  std::printf("%-6s %8zu samples  p50 %7.1f  p90 %7.1f  p99 %7.1f  p99.9 %7.1f  max %8.1f us  steal %.2f%%\n", name,
              us.size(), at(0.5), at(0.9), at(0.99), at(0.999), us.back(), steal);
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
void futex_wake(std::atomic<uint32_t>* word) { syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0); }

void spin_for(int64_t ns) {
  for (const int64_t until = now_ns() + ns; now_ns() < until;) {
  }
}

void timer(double seconds) {
  const auto before = cpu_ticks();
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  std::vector<double> late;
  for (const int64_t until = now_ns() + static_cast<int64_t>(seconds * 1e9); now_ns() < until;) {
    const int64_t start = now_ns();
    const timespec sleep{0, 50'000};
    clock_nanosleep(CLOCK_MONOTONIC, 0, &sleep, nullptr);
    late.push_back((now_ns() - start - 50'000) / 1e3);
  }
  report("timer", late, before);
}

// The waker stamps hand-over n, sets the word to n and wakes; the other thread sleeps on it (or
// spins) and records how long after the stamp it ran. One hand-over at a time: the waker starts
// each pause only once the sleeper recorded the last one and is about to wait again, so that the
// stamp it reads is its own however late it runs, and every sample holds a wake.
void hand_over(const char* name, double seconds, bool sleeper_spins) {
  const auto before = cpu_ticks();
  std::atomic<int64_t> stamp{0};
  std::atomic<uint32_t> word{0};
  std::atomic<uint32_t> waiting_on{0};  // the word value the sleeper waits past next
  std::atomic<bool> done{false};
  std::vector<double> late;
  std::thread sleeper([&] {
    for (uint32_t seen = 0;;) {
      waiting_on.store(seen, std::memory_order_release);
      uint32_t now = 0;
      while ((now = word.load(std::memory_order_acquire)) == seen) {
        if (!sleeper_spins) futex_wait(&word, seen);
      }
      if (done.load()) return;  // stored before the stop's bump: no sample of it
      late.push_back((now_ns() - stamp.load(std::memory_order_acquire)) / 1e3);
      // The value it woke to, not a new read: a bump while it recorded (the stop's, say) must
      // end the next wait at once, not be slept through.
      seen = now;
    }
  });
  std::mt19937 random(7);
  std::uniform_int_distribution<int64_t> pause(20'000, 200'000);
  uint32_t n = 0;
  for (const int64_t until = now_ns() + static_cast<int64_t>(seconds * 1e9); now_ns() < until;) {
    ++n;
    while (waiting_on.load(std::memory_order_acquire) != n - 1) {  // it recorded hand-over n - 1
    }
    spin_for(pause(random));  // by now it sleeps (or spins) on the word
    stamp.store(now_ns(), std::memory_order_release);
    word.store(n, std::memory_order_release);
    if (!sleeper_spins) futex_wake(&word);
  }
  while (waiting_on.load(std::memory_order_acquire) != n) {
  }
  done.store(true);
  word.store(n + 1, std::memory_order_release);
  futex_wake(&word);
  sleeper.join();
  report(name, late, before);
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 3;
  if (seconds <= 0 || seconds > 600) {
    std::fprintf(stderr, "usage: wake_latency_probe [SECONDS]   (0 < SECONDS <= 600; default 3)\n");
    return 2;
  }
  std::printf("how late a thread runs after it should, %.1f s per way\n", seconds);
  timer(seconds);
  hand_over("futex", seconds, false);
  hand_over("spin", seconds, true);
  return 0;
}
