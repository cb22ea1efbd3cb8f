/*
 * A TP=2 offload through libhugepin's C ABI, with each worker rank in its own process.
 *
 * The parent is the engine's scheduler: it plans and creates an arena, forks one worker per rank
 * and sends each job to every worker over a socket (the engine's own channel). Each worker
 * attaches its rank, pins its region when it has a GPU, describes its device KV, and copies.
 * The run checks the protocol and every byte:
 *   - stores: each rank writes a pattern into its device blocks, stores them, and checks its host
 *     region holds exactly that pattern once the job has landed;
 *   - quorum: a job sent to one rank only does not complete; it does when the other reports;
 *   - loads: each rank loads the chunks into other device blocks and checks them;
 *   - retire and fence: retired chunks are not reusable until every rank released the epoch
 *     they were retired in, and are after.
 * Exit status 0 when everything held, 1 on any mismatch or failure (one line says which).
 *
 * Usage: offload_c [--page-size 4K|2M|1G] [--arena NAME]    (a GPU build pins and uses GPU 0)
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hugepin/hugepin.h>

#ifdef HUGEPIN_EXAMPLE_CUDA
#include <cuda_runtime.h>
#endif

#define TP 2
#define DEVICE_BLOCKS 64
#define BLOCK_ELEMENTS 256 /* bf16 elements per block and segment: 512 bytes */
#define CHUNKS_PER_JOB 2

enum op { OP_STORE = 1, OP_LOAD = 2, OP_RELEASE = 3, OP_STOP = 4 };

/* One message from the scheduler to a worker. */
struct message {
  int32_t op;
  uint32_t chunk_count;
  uint64_t job;    /* OP_STORE, OP_LOAD */
  uint64_t value;  /* OP_STORE: pattern version; OP_LOAD: version expected; OP_RELEASE: epoch */
  uint32_t chunks[CHUNKS_PER_JOB];
  uint32_t first_device_block;
};

static void die(const char* what, int rc) {
  fprintf(stderr, "offload_c: %s: %s (%d)\n", what, hugepin_last_error(), rc);
  exit(1);
}
#define CHECK(call)                  \
  do {                               \
    int rc_ = (call);                \
    if (rc_ < 0) die(#call, rc_);    \
  } while (0)

static uint8_t pattern(uint32_t rank, uint32_t chunk, uint64_t version, uint32_t segment, uint64_t block, uint64_t i) {
  uint64_t x = ((uint64_t)rank << 56) ^ ((uint64_t)chunk << 32) ^ (version << 20) ^ ((uint64_t)segment << 16) ^
               (block << 8) ^ i;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 29;
  return (uint8_t)x;
}

/* ---------------------------------------------------------------- worker ---------------- */

struct device_kv {
  uint8_t* base; /* device memory (GPU build) or host memory */
  uint64_t segment_bytes;
  uint32_t segments;
  uint64_t block_bytes;
};

static void device_write(struct device_kv* kv, uint64_t offset, const uint8_t* data, size_t bytes) {
#ifdef HUGEPIN_EXAMPLE_CUDA
  if (cudaMemcpy(kv->base + offset, data, bytes, cudaMemcpyHostToDevice) != cudaSuccess) die("cudaMemcpy", -EIO);
#else
  memcpy(kv->base + offset, data, bytes);
#endif
}

static void device_read(struct device_kv* kv, uint64_t offset, uint8_t* out, size_t bytes) {
#ifdef HUGEPIN_EXAMPLE_CUDA
  if (cudaMemcpy(out, kv->base + offset, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) die("cudaMemcpy", -EIO);
#else
  memcpy(out, kv->base + offset, bytes);
#endif
}

/* The block pairs of a job: chunk i's blocks with device blocks first_device_block + ... */
static size_t job_pairs(const struct message* m, uint64_t blocks_per_chunk, int store, hugepin_block_pair* pairs) {
  size_t n = 0;
  for (uint32_t i = 0; i < m->chunk_count; ++i) {
    for (uint64_t b = 0; b < blocks_per_chunk; ++b) {
      uint64_t host = m->chunks[i] * blocks_per_chunk + b;
      uint64_t device = m->first_device_block + i * blocks_per_chunk + b;
      pairs[n].src = store ? device : host;
      pairs[n].dst = store ? host : device;
      ++n;
    }
  }
  return n;
}

static int check_bytes(const uint8_t* bytes, uint64_t count, uint32_t rank, uint32_t chunk, uint64_t version,
                       uint32_t segment, uint64_t block, const char* where) {
  for (uint64_t i = 0; i < count; ++i) {
    if (bytes[i] != pattern(rank, chunk, version, segment, block, i)) {
      fprintf(stderr, "offload_c: rank %u: %s: chunk %u segment %u block %llu byte %llu is wrong\n", rank, where, chunk,
              segment, (unsigned long long)block, (unsigned long long)i);
      return 0;
    }
  }
  return 1;
}

static void run_worker(const char* arena, uint32_t rank, int channel) {
  hugepin_worker* worker = NULL;
  CHECK(hugepin_worker_attach(arena, rank, 0, NULL, &worker));
  hugepin_region_info region;
  CHECK(hugepin_worker_get_region(worker, &region));
  hugepin_arena_info info;
  CHECK(hugepin_arena_get_info(arena, &info));

  struct device_kv kv;
  hugepin_device_segment segments[8];
  hugepin_segment_info host[8];
  if (region.segments > 8) die("more than 8 segments", -EINVAL);
  kv.segments = region.segments;
  kv.block_bytes = 0;
  for (uint32_t s = 0; s < region.segments; ++s) CHECK(hugepin_worker_get_segment(worker, s, &host[s]));
  kv.block_bytes = host[0].bytes_per_block;
  kv.segment_bytes = DEVICE_BLOCKS * kv.block_bytes;
#ifdef HUGEPIN_EXAMPLE_CUDA
  CHECK(hugepin_worker_pin(worker, 0));
  if (cudaMalloc((void**)&kv.base, kv.segments * kv.segment_bytes) != cudaSuccess) die("cudaMalloc", -ENOMEM);
  hugepin_backend backend = HUGEPIN_BACKEND_GPU;
#else
  kv.base = malloc(kv.segments * kv.segment_bytes);
  hugepin_backend backend = HUGEPIN_BACKEND_HOST;
#endif
  for (uint32_t s = 0; s < kv.segments; ++s) {
    segments[s].device_base = (uint64_t)(uintptr_t)(kv.base + s * kv.segment_bytes);
    segments[s].block_stride = kv.block_bytes;
    segments[s].blocks = DEVICE_BLOCKS;
    segments[s].bytes_per_block = host[s].bytes_per_block;
  }
  CHECK(hugepin_worker_set_device_kv(worker, segments, kv.segments, backend));

  hugepin_block_pair pairs[CHUNKS_PER_JOB * 64];
  uint8_t* block = malloc(kv.block_bytes);
  int ok = 1;
  for (;;) {
    struct message m;
    if (read(channel, &m, sizeof m) != (ssize_t)sizeof m) die("reading the channel", -EIO);
    if (m.op == OP_STOP) break;
    if (m.op == OP_RELEASE) {
      CHECK(hugepin_worker_release(worker, m.value, NULL));
    } else {
      const int store = m.op == OP_STORE;
      for (uint32_t i = 0; i < m.chunk_count; ++i) {
        for (uint32_t s = 0; s < kv.segments; ++s) {
          for (uint64_t b = 0; b < info.blocks_per_chunk; ++b) {
            const uint64_t offset = s * kv.segment_bytes + (m.first_device_block + i * info.blocks_per_chunk + b) * kv.block_bytes;
            for (uint64_t k = 0; k < kv.block_bytes; ++k) block[k] = store ? pattern(rank, m.chunks[i], m.value, s, b, k) : 0;
            device_write(&kv, offset, block, kv.block_bytes);
          }
        }
      }
      size_t n = job_pairs(&m, info.blocks_per_chunk, store, pairs);
      CHECK(store ? hugepin_worker_store(worker, m.job, pairs, n, NULL) : hugepin_worker_load(worker, m.job, pairs, n, NULL));
      CHECK(hugepin_worker_wait(worker, m.job, 10LL * 1000 * 1000 * 1000));
      for (uint32_t i = 0; i < m.chunk_count && ok; ++i) {
        for (uint32_t s = 0; s < kv.segments && ok; ++s) {
          for (uint64_t b = 0; b < info.blocks_per_chunk && ok; ++b) {
            if (store) {  /* the host region holds what the device held */
              const uint8_t* bytes = (const uint8_t*)region.base + host[s].host_offset +
                                     (m.chunks[i] * info.blocks_per_chunk + b) * host[s].host_block_stride;
              ok = check_bytes(bytes, kv.block_bytes, rank, m.chunks[i], m.value, s, b, "store");
            } else {      /* the device holds what the store wrote */
              device_read(&kv, s * kv.segment_bytes + (m.first_device_block + i * info.blocks_per_chunk + b) * kv.block_bytes,
                          block, kv.block_bytes);
              ok = check_bytes(block, kv.block_bytes, rank, m.chunks[i], m.value, s, b, "load");
            }
          }
        }
      }
    }
    const char ack = ok ? 'y' : 'n';
    if (write(channel, &ack, 1) != 1) die("acknowledging", -EIO);
    if (!ok) break;
  }
  free(block);
  CHECK(hugepin_worker_detach(worker));
  _exit(ok ? 0 : 1);
}

/* ---------------------------------------------------------------- scheduler -------------- */

struct engine {
  hugepin_scheduler* scheduler;
  int channels[TP];
  pid_t pids[TP];
};

static void send_to(struct engine* e, uint32_t rank, const struct message* m) {
  char ack = 0;
  if (write(e->channels[rank], m, sizeof *m) != (ssize_t)sizeof *m) die("sending a job", -EIO);
  if (read(e->channels[rank], &ack, 1) != 1 || ack != 'y') {
    fprintf(stderr, "offload_c: rank %u failed its check (see above)\n", rank);
    exit(1);
  }
}

/* Drains until `job` completes; fails after 10 s. */
static void wait_completed(struct engine* e, hugepin_job_id job) {
  for (int i = 0; i < 1000; ++i) {
    CHECK(hugepin_scheduler_drain(e->scheduler, 10 * 1000 * 1000, NULL));
    hugepin_job_id done[16];
    size_t n = 0;
    CHECK(hugepin_scheduler_completed(e->scheduler, done, 16, &n));
    for (size_t k = 0; k < n; ++k) {
      if (done[k] == job) return;
    }
    hugepin_failed_job failed;
    CHECK(hugepin_scheduler_failed(e->scheduler, &failed, 1, &n));
    if (n > 0) {
      fprintf(stderr, "offload_c: job %llu failed: %s\n", (unsigned long long)failed.job, failed.message);
      exit(1);
    }
  }
  fprintf(stderr, "offload_c: job %llu did not reach quorum in 10 s\n", (unsigned long long)job);
  exit(1);
}

static size_t reusable_now(struct engine* e, hugepin_chunk_id* out, size_t capacity) {
  size_t n = 0;
  CHECK(hugepin_scheduler_drain(e->scheduler, 0, NULL));
  CHECK(hugepin_scheduler_reusable(e->scheduler, out, capacity, &n));
  return n;
}

static const char* plan_json(const char* page_size) {
  static char json[2048];
  /* Each rank: one KV tensor, K/V outermost (two segments of 512 bytes per block). */
  const char* rank_format =
      "{\"tp_rank\": %d, \"pp_rank\": 0, \"num_blocks\": %d, \"tensors\": [{\"name\": \"layers.0\", "
      "\"shape\": [2, %d, %d], \"strides\": [%d, %d, 1], \"element_size\": 2, \"storage\": \"kv\"}]}";
  char ranks[2][400];
  for (int r = 0; r < 2; ++r) {
    snprintf(ranks[r], sizeof ranks[r], rank_format, r, DEVICE_BLOCKS, DEVICE_BLOCKS, BLOCK_ELEMENTS,
             DEVICE_BLOCKS * BLOCK_ELEMENTS, BLOCK_ELEMENTS);
  }
  snprintf(json, sizeof json,
           "{\"tp\": 2, \"pp\": 1, \"blocks_per_chunk\": 4, \"cpu_bytes\": 262144, \"page_size\": \"%s\", "
           "\"ranks\": [%s, %s]}",
           page_size, ranks[0], ranks[1]);
  return json;
}

int main(int argc, char** argv) {
  const char* page_size = "4K";
  char arena[64];
  snprintf(arena, sizeof arena, "example-c-%d", (int)getpid());
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--page-size") == 0) page_size = argv[i + 1];
    else if (strcmp(argv[i], "--arena") == 0) snprintf(arena, sizeof arena, "%s", argv[i + 1]);
    else {
      fprintf(stderr, "usage: %s [--page-size 4K|2M|1G] [--arena NAME]\n", argv[0]);
      return 2;
    }
  }
  printf("hugepin %s (compiled against %d)\n", hugepin_version_string(), HUGEPIN_VERSION);

  hugepin_plan* plan = NULL;
  const char* json = plan_json(page_size);
  CHECK(hugepin_plan_from_json(json, strlen(json), &plan));
  hugepin_plan_info plan_info;
  CHECK(hugepin_plan_get_info(plan, &plan_info));
  printf("plan: tp %u x pp %u, %u chunks of %llu blocks, page size %llu\n", plan_info.tp, plan_info.pp,
         plan_info.chunk_count, (unsigned long long)plan_info.blocks_per_chunk, (unsigned long long)plan_info.page_size);

  struct engine e;
  CHECK(hugepin_scheduler_create(arena, plan, NULL, NULL, &e.scheduler));
  hugepin_plan_free(plan);
  fflush(stdout);
  for (uint32_t rank = 0; rank < TP; ++rank) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) die("socketpair", -errno);
    e.pids[rank] = fork();
    if (e.pids[rank] == 0) {
      close(fds[0]);
      run_worker(arena, rank, fds[1]);
    }
    close(fds[1]);
    e.channels[rank] = fds[0];
  }

  /* Stores: chunks 0 .. 7, two per job; the first job goes to rank 0 alone first. */
  const uint32_t chunks = plan_info.chunk_count < 8 ? plan_info.chunk_count : 8;
  for (uint32_t c = 0; c + 1 < chunks; c += 2) {
    hugepin_chunk_id ids[2] = {c, c + 1};
    struct message m = {OP_STORE, 2, 0, 1, {c, c + 1}, 0};
    CHECK(hugepin_scheduler_dispatch(e.scheduler, HUGEPIN_STORE, ids, 2, &m.job));
    send_to(&e, 0, &m);
    if (c == 0) {  /* quorum: one rank's report is not enough */
      hugepin_job_id done[4];
      size_t n = 0;
      CHECK(hugepin_scheduler_drain(e.scheduler, 50 * 1000 * 1000, NULL));
      CHECK(hugepin_scheduler_completed(e.scheduler, done, 4, &n));
      if (n != 0) {
        fprintf(stderr, "offload_c: job %llu completed with one rank of two\n", (unsigned long long)m.job);
        return 1;
      }
    }
    send_to(&e, 1, &m);
    wait_completed(&e, m.job);
  }
  printf("stores: %u chunks on %d ranks, every byte checked, quorum held back by a missing rank\n", chunks, TP);

  /* Loads: every stored chunk back into device blocks 16.., checked on each rank. */
  for (uint32_t c = 0; c + 1 < chunks; c += 2) {
    hugepin_chunk_id ids[2] = {c, c + 1};
    struct message m = {OP_LOAD, 2, 0, 1, {c, c + 1}, 16};
    CHECK(hugepin_scheduler_dispatch(e.scheduler, HUGEPIN_LOAD, ids, 2, &m.job));
    for (uint32_t rank = 0; rank < TP; ++rank) send_to(&e, rank, &m);
    wait_completed(&e, m.job);
  }
  printf("loads: %u chunks, every byte checked\n", chunks);

  /* Retire and fence: retired in epoch 1, reusable only once both ranks released epoch 1. */
  for (uint32_t c = 0; c < chunks; ++c) CHECK(hugepin_scheduler_retire(e.scheduler, c));
  hugepin_epoch epoch = 0;
  CHECK(hugepin_scheduler_begin_epoch(e.scheduler, &epoch));
  hugepin_chunk_id reusable[16];
  if (reusable_now(&e, reusable, 16) != 0) {
    fprintf(stderr, "offload_c: chunks reusable before any rank released their epoch\n");
    return 1;
  }
  struct message release = {OP_RELEASE, 0, 0, epoch - 1, {0, 0}, 0};
  send_to(&e, 0, &release);
  if (reusable_now(&e, reusable, 16) != 0) {
    fprintf(stderr, "offload_c: chunks reusable after one rank of two released their epoch\n");
    return 1;
  }
  send_to(&e, 1, &release);
  size_t n = reusable_now(&e, reusable, 16);
  if (n != chunks) {
    fprintf(stderr, "offload_c: %zu chunks reusable after both ranks released, expected %u\n", n, chunks);
    return 1;
  }
  printf("fence: %u retired chunks reusable only after both ranks released epoch %llu\n", chunks,
         (unsigned long long)(epoch - 1));

  int failed = 0;
  for (uint32_t rank = 0; rank < TP; ++rank) {
    struct message stop = {OP_STOP, 0, 0, 0, {0, 0}, 0};
    if (write(e.channels[rank], &stop, sizeof stop) != (ssize_t)sizeof stop) die("stopping a worker", -EIO);
    int status = 0;
    waitpid(e.pids[rank], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  }
  hugepin_scheduler_figures figures;
  CHECK(hugepin_scheduler_get_figures(e.scheduler, &figures));
  printf("scheduler: %llu jobs completed, %llu failed, %llu reports applied, %llu rejected\n",
         (unsigned long long)figures.jobs_completed, (unsigned long long)figures.jobs_failed,
         (unsigned long long)figures.reports_applied, (unsigned long long)figures.reports_rejected);
  CHECK(hugepin_scheduler_close(e.scheduler));
  if (failed || figures.jobs_failed != 0 || figures.reports_rejected != 0) {
    fprintf(stderr, "offload_c: FAILED\n");
    return 1;
  }
  printf("offload_c: OK\n");
  return 0;
}
