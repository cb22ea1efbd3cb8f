// membarrier_reach: does membarrier(2) MEMBARRIER_CMD_GLOBAL_EXPEDITED reach a thread of this
// process on another CPU? Why ipc/doorbell.h no longer relies on it (docs/performance.md).
//
// Each trial is a fresh child process with a thread pinned to a second CPU. In the "registered
// first" way the child registers for the barrier before that thread starts; in the "registered
// while the thread slept" way the thread runs on its CPU, sleeps there (the CPU idles holding this
// process's memory map lazily), the child registers, and the thread then spins. The child then
// issues 20000 barriers and reports what each cost and how many function-call interrupts ("CAL"
// in /proc/interrupts) the thread's CPU received meanwhile: a barrier that reaches the thread
// interrupts its CPU and costs microseconds; one that skips it costs what an unregistered call
// does (0.1-0.2 us). Then it plays the doorbell's old Dekker pair (below) 200000 times and counts
// the rounds a wake-up would have been lost in: the store has to sit in the waker's store buffer
// through the waiter's whole barrier call for that, a narrow window. Not part of hugepin; needs
// two CPUs. Usage: membarrier_reach [TRIALS]
#define _GNU_SOURCE
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kBarriers = 20000, kRounds = 200000 };

static atomic_int phase;  // 0 starting, 1 thread sleeping, 2 thread running (rounds), 3 stop
static int thread_cpu;

static int membarrier(int command) { return (int)syscall(__NR_membarrier, command, 0, 0); }

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// The function-call interrupts CPU `cpu` has taken so far (-1: not readable).
static long call_interrupts(int cpu) {
  FILE* file = fopen("/proc/interrupts", "r");
  if (file == NULL) return -1;
  char line[16384];
  long count = -1;
  while (fgets(line, sizeof line, file) != NULL) {
    char* field = line;
    while (*field == ' ') ++field;
    if (strncmp(field, "CAL:", 4) != 0) continue;
    field += 4;
    for (int i = 0; i <= cpu; ++i) {
      char* end = NULL;
      const long value = strtol(field, &end, 10);
      if (end == field) break;
      if (i == cpu) count = value;
      field = end;
    }
  }
  fclose(file);
  return count;
}

// The Dekker pair of the doorbell as it was, one round at a time: the thread (the waker) stores
// `published` and reads `sleepers` with no fence; this process's main thread (the waiter) counts
// itself in `sleepers` with a full fence, issues the barrier and reads `published`. A round where
// neither saw the other's store is a wake-up the doorbell would have lost.
static atomic_ulong round_go, round_done, published, sleepers;
static unsigned long waker_saw;  // what the waker read of `sleepers` in the round just done

static void* thread_main(void* unused) {
  (void)unused;
  if (pin(thread_cpu) != 0) exit(3);
  atomic_store(&phase, 1);
  while (atomic_load(&phase) == 1) usleep(1000);
  for (unsigned long round = 1;; ++round) {
    unsigned long go;
    while ((go = atomic_load_explicit(&round_go, memory_order_acquire)) < round) {
      if (atomic_load(&phase) == 3) return NULL;
    }
    atomic_store_explicit(&published, round, memory_order_release);
    atomic_signal_fence(memory_order_seq_cst);
    waker_saw = atomic_load_explicit(&sleepers, memory_order_relaxed);
    atomic_store_explicit(&round_done, round, memory_order_release);
  }
}

// Rounds of the pair above in which both sides missed the other (the barrier failed its promise).
static long lost_rounds(long rounds) {
  long lost = 0;
  for (unsigned long round = 1; round <= (unsigned long)rounds; ++round) {
    atomic_store_explicit(&round_go, round, memory_order_release);
    atomic_exchange(&sleepers, round);
    membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED);
    const unsigned long waiter_saw = atomic_load(&published);
    while (atomic_load_explicit(&round_done, memory_order_acquire) < round) {
    }
    if (waiter_saw != round && waker_saw != round) ++lost;
  }
  return lost;
}

// One trial in this (child) process; exits 0 when the barriers reached the thread's CPU, 1 when not.
static void trial(int register_first) {
  if (pin(0) != 0) exit(3);
  if (register_first && membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0) exit(4);
  pthread_t thread;
  if (pthread_create(&thread, NULL, thread_main, NULL) != 0) exit(3);
  while (atomic_load(&phase) != 1) {
  }
  usleep(200000);
  if (!register_first && membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0) exit(4);
  atomic_store(&phase, 2);
  usleep(100000);
  const long before = call_interrupts(thread_cpu);
  const double start = now_us();
  for (int i = 0; i < kBarriers; ++i) membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED);
  const double per_call = (now_us() - start) / kBarriers;
  const long after = call_interrupts(thread_cpu);
  const long lost = lost_rounds(kRounds);
  atomic_store(&phase, 3);
  pthread_join(thread, NULL);
  const long interrupts = before < 0 || after < 0 ? -1 : after - before;
  printf("  %-34s %6.2f us a barrier, CPU %d took %ld call interrupts; %ld of %d Dekker rounds lost\n",
         register_first ? "registered first:" : "registered while the thread slept:", per_call, thread_cpu,
         interrupts, lost, kRounds);
  // Reached: most barriers interrupted the thread's CPU (a few find it between two runs).
  exit(interrupts >= kBarriers / 2 ? 0 : 1);
}

int main(int argc, char** argv) {
  const int trials = argc > 1 ? atoi(argv[1]) : 3;
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || trials < 1) {
    fprintf(stderr, "membarrier_reach: needs two CPUs and TRIALS >= 1\n");
    return 2;
  }
  thread_cpu = 1;
  int missed[2] = {0, 0};
  for (int way = 1; way >= 0; --way) {
    for (int i = 0; i < trials; ++i) {
      fflush(stdout);
      const pid_t child = fork();
      if (child < 0) return 2;
      if (child == 0) trial(way);
      int status = 0;
      if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) > 1) {
        fprintf(stderr, "membarrier_reach: a trial failed (status %d)\n", status);
        return 2;
      }
      missed[way] += WEXITSTATUS(status);
    }
  }
  printf("barriers that missed the thread's CPU: registered first %d of %d trials, registered while it slept %d of %d\n",
         missed[1], trials, missed[0], trials);
  return 0;
}
