// sleep_cpu_probe [SECONDS]: how much of its own CPU a thread spends to sleep once and be woken,
// the floor under `hugepin bench offload`'s scheduler CPU per job whenever the scheduler sleeps
// until a job can settle. Issue 16's target is at most 1 us per job and rank, 4 us per job at
// TP 2 x PP 2, and the report gate already wakes the scheduler at most once per job
// (ipc/report_gate.h): whatever one sleep costs here, a scheduler that sleeps once per job pays
// at least that per job. Not part of hugepin.
//
// The sleeper sleeps as the scheduler does in ReportGate::wait: FUTEX_WAIT on a word in
// MAP_SHARED memory (a shared futex, not a private one), four ways: with a timeout of 1 ms (the
// benchmark's collect timeout), the same with the thread's timer slack at 10 ms (PR_SET_TIMERSLACK:
// the timer may fire up to 10 ms late), the same with the slack read, set and restored around each
// sleep (three more system calls, as a library that must leave its caller's thread as it found it
// does), with a timeout of 100 ms, and with none. A timer that
// expires before the next scheduler tick has the kernel reprogram the CPU's timer device when it
// is set and again when it is cancelled; in a virtual machine each of those can be an exit to the
// hypervisor, charged to the sleeper. The waker is another process, as a rank is: it waits until the sleeper
// is about to sleep, spins for the gap, bumps the word and calls FUTEX_WAKE. The sleeper reads its
// thread CPU clock before FUTEX_WAIT and after it returns; the cost of a clock read, measured
// first, is taken off. Each gap and way runs SECONDS / 15 (default 15 s in all) and prints the CPU per sleep
// at p50, p90 and mean, how many waits ended otherwise than by a wake (timed out, spurious), and
// the machine's steal time meanwhile.
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <numeric>
#include <vector>

#include "bench/scheduler_stalls.h"

namespace {

int64_t clock_ns(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

// What the two processes share, each word on its own pair of cache lines.
struct Shared {
  alignas(128) std::atomic<uint32_t> word{0};       // the futex word: bumped by every wake
  alignas(128) std::atomic<uint32_t> asleep_on{0};  // the word value the sleeper sleeps on, + 1
  alignas(128) std::atomic<uint32_t> stop{0};
};

// The cost of one read of the thread CPU clock (a system call in some virtual machines).
double clock_read_ns() {
  constexpr int kReads = 10000;
  const int64_t start = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  for (int i = 0; i < kReads; ++i) clock_ns(CLOCK_THREAD_CPUTIME_ID);
  return static_cast<double>(clock_ns(CLOCK_THREAD_CPUTIME_ID) - start) / (kReads + 1);
}

// The waker: for each sleep, waits until the sleeper announced it, spins `gap_ns`, wakes it.
[[noreturn]] void waker(Shared& shared, int64_t gap_ns) {
  for (;;) {
    uint32_t announced = 0;
    while ((announced = shared.asleep_on.load(std::memory_order_acquire)) == 0) {
      if (shared.stop.load(std::memory_order_acquire) != 0) _exit(0);
    }
    shared.asleep_on.store(0, std::memory_order_relaxed);
    for (const int64_t until = clock_ns(CLOCK_MONOTONIC) + gap_ns; clock_ns(CLOCK_MONOTONIC) < until;) {
    }
    shared.word.store(announced, std::memory_order_release);  // announced = the slept-on value + 1
    syscall(SYS_futex, &shared.word, FUTEX_WAKE, 1, nullptr, nullptr, 0);
  }
}

struct Way {
  const char* name;
  int64_t timeout_ns;  // -1: none
  unsigned long slack_ns;
  unsigned long slack_per_sleep_ns = 0;  // set around each sleep and restored after it (0: not)
};

void measure(Shared& shared, int64_t gap_ns, const Way& way, double seconds, double read_ns) {
  const int64_t timeout_ns = way.timeout_ns;
  shared.word.store(0);
  shared.asleep_on.store(0);
  shared.stop.store(0);
  const pid_t child = fork();
  if (child < 0) {
    std::perror("fork");
    std::exit(1);
  }
  if (child == 0) waker(shared, gap_ns);
  const auto slack_before = static_cast<unsigned long>(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0));
  prctl(PR_SET_TIMERSLACK, way.slack_ns, 0, 0, 0);
  const auto ticks_before = hugepin::bench::machine_cpu_ticks(hugepin::real_os());
  std::vector<double> cpu_us;
  size_t not_woken = 0;
  const timespec timeout{timeout_ns / 1'000'000'000, timeout_ns % 1'000'000'000};
  for (const int64_t until = clock_ns(CLOCK_MONOTONIC) + static_cast<int64_t>(seconds * 1e9);
       clock_ns(CLOCK_MONOTONIC) < until;) {
    const uint32_t seen = shared.word.load(std::memory_order_acquire);
    shared.asleep_on.store(seen + 1, std::memory_order_release);
    const int64_t before = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    unsigned long restore = 0;
    if (way.slack_per_sleep_ns != 0) {
      restore = static_cast<unsigned long>(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0));
      prctl(PR_SET_TIMERSLACK, way.slack_per_sleep_ns, 0, 0, 0);
    }
    const long rc = syscall(SYS_futex, &shared.word, FUTEX_WAIT, seen, timeout_ns < 0 ? nullptr : &timeout, nullptr, 0);
    if (way.slack_per_sleep_ns != 0) prctl(PR_SET_TIMERSLACK, restore, 0, 0, 0);
    const int64_t after = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    cpu_us.push_back((static_cast<double>(after - before) - read_ns) / 1e3);
    if (rc != 0) ++not_woken;
    // Until the waker's bump lands (a wait that ended early), so that every sleep is one hand-over.
    while (shared.word.load(std::memory_order_acquire) == seen) {
    }
  }
  prctl(PR_SET_TIMERSLACK, slack_before, 0, 0, 0);
  shared.stop.store(1, std::memory_order_release);
  waitpid(child, nullptr, 0);
  const double steal = 100 * hugepin::bench::steal_share(ticks_before, hugepin::bench::machine_cpu_ticks(hugepin::real_os()));
  std::sort(cpu_us.begin(), cpu_us.end());
  auto at = [&cpu_us](double p) { return cpu_us[std::min(cpu_us.size() - 1, static_cast<size_t>(p * cpu_us.size()))]; };
  const double mean = std::accumulate(cpu_us.begin(), cpu_us.end(), 0.0) / static_cast<double>(cpu_us.size());
  std::printf("gap %4.0f us  %-22s  %7zu sleeps  CPU per sleep p50 %5.2f  p90 %5.2f  mean %5.2f us  "
              "not woken %zu  steal %.2f%%\n",
              gap_ns / 1e3, way.name, cpu_us.size(), at(0.5), at(0.9), mean, not_woken, steal);
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 15;
  if (seconds <= 0 || seconds > 600) {
    std::fprintf(stderr, "usage: sleep_cpu_probe [SECONDS]   (0 < SECONDS <= 600; default 15)\n");
    return 2;
  }
  void* memory = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  Shared& shared = *new (memory) Shared;
  const double read_ns = clock_read_ns();
  std::printf("CPU a thread spends per futex sleep, woken by another process after a gap; clock read %.2f us\n",
              read_ns / 1e3);
  constexpr int64_t kGapsNs[] = {20'000, 100'000, 500'000};
  const Way ways[] = {{"timeout 1 ms", 1'000'000, 50'000},
                      {"timeout 1 ms, slack 10 ms", 1'000'000, 10'000'000},
                      {"the same, set per sleep", 1'000'000, 50'000, 10'000'000},
                      {"timeout 100 ms", 100'000'000, 50'000},
                      {"no timeout", -1, 50'000}};
  for (int64_t gap : kGapsNs) {
    for (const Way& way : ways) measure(shared, gap, way, seconds / 15, read_ns);
  }
  return 0;
}
