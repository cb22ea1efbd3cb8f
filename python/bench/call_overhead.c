/*
 * The C side of the Python package's per-call overhead: the time of one hugepin_worker_store and
 * one hugepin_worker_load call, straight from C, at each pair count. call_overhead.py makes the
 * same calls through the package, in the same way, and prints both side by side.
 *
 * One process holds a TP=1 arena's scheduler and its worker. Each timed call is one job: dispatch
 * (untimed), the call (timed: CLOCK_MONOTONIC around it alone), then, untimed, the wait for its
 * copies and a drain of its report, so every call starts from the same idle state. Device blocks
 * are host memory (host memcpy backend) or, built with -DHUGEPIN_BENCH_CUDA, GPU memory (the
 * region pinned, GPU backend: the call enqueues and returns). Pairs map device block i to host
 * block i.
 *
 * Usage: call_overhead [--pairs 64,4096] [--iterations N] [--block-bytes B] [--gpu DEVICE]
 * Prints one JSON object: {"backend", "block_bytes", "iterations", "rows": [{"pairs", "kind",
 * "median_ns", "p90_ns"}]}. Exit status 1 on any failure (one line says which).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hugepin/hugepin.h>

#ifdef HUGEPIN_BENCH_CUDA
#include <cuda_runtime.h>
#endif

#define BLOCKS_PER_CHUNK 64
#define MAX_COUNTS 8

static void die(const char* what, int rc) {
  fprintf(stderr, "call_overhead: %s: %s (%d)\n", what, hugepin_last_error(), rc);
  exit(1);
}
#define CHECK(call)               \
  do {                            \
    int rc_ = (call);             \
    if (rc_ < 0) die(#call, rc_); \
  } while (0)

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int compare(const void* a, const void* b) {
  const int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
  return (x > y) - (x < y);
}

struct bench {
  hugepin_scheduler* scheduler;
  hugepin_worker* worker;
  hugepin_chunk_id chunks[4096];
};

/* Dispatches, times the call, waits for the copies and the quorum. Returns the call's ns. */
static int64_t one_call(struct bench* b, int store, const hugepin_block_pair* pairs, size_t count) {
  const size_t chunks = (count + BLOCKS_PER_CHUNK - 1) / BLOCKS_PER_CHUNK;
  hugepin_job_id job = 0;
  CHECK(hugepin_scheduler_dispatch(b->scheduler, store ? HUGEPIN_STORE : HUGEPIN_LOAD, b->chunks, chunks, &job));
  const int64_t start = now_ns();
  const int rc = store ? hugepin_worker_store(b->worker, job, pairs, count, NULL)
                       : hugepin_worker_load(b->worker, job, pairs, count, NULL);
  const int64_t took = now_ns() - start;
  if (rc < 0) die(store ? "hugepin_worker_store" : "hugepin_worker_load", rc);
  CHECK(hugepin_worker_wait(b->worker, job, 10LL * 1000 * 1000 * 1000));
  hugepin_job_result results[4];
  size_t n = 0;
  CHECK(hugepin_worker_finished(b->worker, results, 4, &n));
  for (int i = 0; i < 1000; ++i) {
    hugepin_job_id done = 0;
    CHECK(hugepin_scheduler_drain(b->scheduler, 10 * 1000 * 1000, NULL));
    CHECK(hugepin_scheduler_completed(b->scheduler, &done, 1, &n));
    if (n == 1 && done == job) return took;
    if (n == 1) break;
  }
  fprintf(stderr, "call_overhead: job %llu did not complete\n", (unsigned long long)job);
  exit(1);
}

int main(int argc, char** argv) {
  size_t counts[MAX_COUNTS] = {64, 4096};
  size_t ncounts = 2;
  int iterations = 2000;
  uint64_t block_bytes = 512;
  int gpu = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--pairs") == 0) {
      ncounts = 0;
      for (char* p = strtok(argv[i + 1], ","); p != NULL && ncounts < MAX_COUNTS; p = strtok(NULL, ",")) {
        counts[ncounts++] = strtoull(p, NULL, 10);
      }
    } else if (strcmp(argv[i], "--iterations") == 0) {
      iterations = atoi(argv[i + 1]);
    } else if (strcmp(argv[i], "--block-bytes") == 0) {
      block_bytes = strtoull(argv[i + 1], NULL, 10);
    } else if (strcmp(argv[i], "--gpu") == 0) {
      gpu = atoi(argv[i + 1]);
    } else {
      fprintf(stderr, "usage: %s [--pairs 64,4096] [--iterations N] [--block-bytes B] [--gpu DEVICE]\n", argv[0]);
      return 2;
    }
  }
  size_t max_pairs = 0;
  for (size_t i = 0; i < ncounts; ++i) {
    if (counts[i] == 0 || counts[i] > 4096 * BLOCKS_PER_CHUNK) {
      fprintf(stderr, "call_overhead: --pairs %zu: give 1 to %d\n", counts[i], 4096 * BLOCKS_PER_CHUNK);
      return 2;
    }
    if (counts[i] > max_pairs) max_pairs = counts[i];
  }
  if (iterations < 1 || block_bytes == 0) {
    fprintf(stderr, "call_overhead: --iterations and --block-bytes must be at least 1\n");
    return 2;
  }
#ifndef HUGEPIN_BENCH_CUDA
  if (gpu >= 0) {
    fprintf(stderr, "call_overhead: --gpu: built without CUDA (-DHUGEPIN_BENCH_CUDA)\n");
    return 2;
  }
#endif

  const uint64_t blocks = (max_pairs + BLOCKS_PER_CHUNK - 1) / BLOCKS_PER_CHUNK * BLOCKS_PER_CHUNK;
  char json[512];
  snprintf(json, sizeof json,
           "{\"tp\": 1, \"pp\": 1, \"blocks_per_chunk\": %d, \"cpu_bytes\": %llu, \"page_size\": \"4K\", "
           "\"ranks\": [{\"tp_rank\": 0, \"pp_rank\": 0, \"num_blocks\": %llu, \"bytes_per_block\": %llu}]}",
           BLOCKS_PER_CHUNK, (unsigned long long)(blocks * block_bytes), (unsigned long long)blocks,
           (unsigned long long)block_bytes);
  hugepin_plan* plan = NULL;
  CHECK(hugepin_plan_from_json(json, strlen(json), &plan));
  char arena[64];
  snprintf(arena, sizeof arena, "overhead-c-%d", (int)getpid());
  struct bench b;
  CHECK(hugepin_scheduler_create(arena, plan, NULL, NULL, &b.scheduler));
  hugepin_plan_free(plan);
  CHECK(hugepin_worker_attach(arena, 0, 0, NULL, &b.worker));
  for (uint32_t c = 0; c < 4096; ++c) b.chunks[c] = c;

  void* device = NULL;
  hugepin_backend backend = HUGEPIN_BACKEND_HOST;
#ifdef HUGEPIN_BENCH_CUDA
  if (gpu >= 0) {
    if (cudaSetDevice(gpu) != cudaSuccess || cudaMalloc(&device, blocks * block_bytes) != cudaSuccess) {
      die("cudaMalloc", -ENOMEM);
    }
    CHECK(hugepin_worker_pin(b.worker, gpu));
    backend = HUGEPIN_BACKEND_GPU;
  }
#endif
  if (device == NULL) device = calloc(blocks, block_bytes);
  hugepin_device_segment segment = {(uint64_t)(uintptr_t)device, block_bytes, blocks, block_bytes};
  CHECK(hugepin_worker_set_device_kv(b.worker, &segment, 1, backend));

  hugepin_block_pair* pairs = calloc(max_pairs, sizeof *pairs);
  int64_t* samples = calloc((size_t)iterations, sizeof *samples);
  for (size_t i = 0; i < max_pairs; ++i) pairs[i] = (hugepin_block_pair){i, i};
  printf("{\"backend\": \"%s\", \"block_bytes\": %llu, \"iterations\": %d, \"rows\": [", gpu >= 0 ? "gpu" : "host",
         (unsigned long long)block_bytes, iterations);
  for (size_t c = 0; c < ncounts; ++c) {
    for (int store = 1; store >= 0; --store) {
      for (int i = 0; i < iterations / 10 + 1; ++i) one_call(&b, store, pairs, counts[c]);  /* warm up */
      for (int i = 0; i < iterations; ++i) samples[i] = one_call(&b, store, pairs, counts[c]);
      qsort(samples, (size_t)iterations, sizeof *samples, compare);
      printf("%s{\"pairs\": %zu, \"kind\": \"%s\", \"median_ns\": %lld, \"p90_ns\": %lld}",
             c == 0 && store == 1 ? "" : ", ", counts[c], store ? "store" : "load",
             (long long)samples[iterations / 2], (long long)samples[iterations * 9 / 10]);
    }
  }
  printf("]}\n");
  CHECK(hugepin_worker_detach(b.worker));
  CHECK(hugepin_scheduler_close(b.scheduler));
#ifdef HUGEPIN_BENCH_CUDA
  if (gpu >= 0) cudaFree(device);
  else free(device);
#else
  free(device);
#endif
  free(pairs);
  free(samples);
  return 0;
}
