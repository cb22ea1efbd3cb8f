/*
 * The C side of the Python package's per-call overhead (call_overhead.py): one
 * hugepin_worker_store or hugepin_worker_load call, timed in C (CLOCK_MONOTONIC around the call
 * alone), on the worker the Python benchmark attached. Built as a shared library that the benchmark
 * loads, so the C calls and the Python calls run in one process on the same worker, arena and
 * pairs, interleaved call by call: whatever state the library or the machine is in, both sides see
 * it alike. The only difference left is what the Python package adds.
 */
#include <stdint.h>
#include <time.h>

#include <hugepin/hugepin.h>

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Calls hugepin_worker_store (store nonzero) or hugepin_worker_load with `pairs`, NULL stream; sets
 * *rc to what it returned and returns the call's nanoseconds. */
__attribute__((visibility("default"))) int64_t hugepin_bench_timed_call(hugepin_worker* worker, int store,
                                                                        uint64_t job, const hugepin_block_pair* pairs,
                                                                        size_t count, int* rc) {
  const int64_t start = now_ns();
  *rc = store ? hugepin_worker_store(worker, job, pairs, count, NULL) : hugepin_worker_load(worker, job, pairs, count, NULL);
  return now_ns() - start;
}
