/*
 * hugepin.h: the C ABI of libhugepin, the host-memory tier of KV-cache offloading.
 *
 * Who calls what. An engine has one scheduler process and one worker process per GPU rank
 * (TP x PP ranks). The scheduler plans an arena (one hugepage-backed region per rank, one chunk
 * count for all ranks), creates it (or adopts one that hugepind keeps), and dispatches copy jobs
 * over chunks. Each worker attaches its rank's region, pins it for its GPU, describes its own
 * device KV buffers once, and copies the blocks of each job; when a job's copies have landed the
 * library posts a copy-complete report on the rank's ring, from the completion itself (no
 * polling). The scheduler drains the rings: a job completes when every rank reported it (the
 * quorum), and a retired chunk becomes reusable only when no copy holds it and every rank has
 * released the compute epoch it was retired in (the fence). How a job reaches the workers is the
 * engine's business (its own RPC): the library needs the job id and the block pairs.
 *
 *   scheduler                                   worker (one per rank)
 *   hugepin_plan_from_json(json, &plan)         hugepin_worker_attach("kv", tp, pp, 0, &w)
 *   hugepin_scheduler_create("kv", plan, ...)   hugepin_worker_pin(w, device)
 *   hugepin_scheduler_dispatch(s, STORE, ...)   hugepin_worker_set_device_kv(w, segments, n, 0)
 *     -> job id, sent to every rank            hugepin_worker_store(w, job, pairs, n, stream)
 *   hugepin_scheduler_drain(s, timeout)           ... copies land, the report is posted
 *   hugepin_scheduler_completed(s, ...)         hugepin_worker_release(w, epoch, stream)
 *   hugepin_scheduler_retire / begin_epoch / reusable
 *
 * Conventions, for every function here:
 *   - The return value is 0 on success or a negative errno-style code (-EINVAL: bad argument,
 *     -ENOENT: no such arena, -ERANGE: a rank, chunk or block out of range, -EBUSY: held by a
 *     live process, -EAGAIN: a ring stayed full, -EIO: a copy failed, -ETIMEDOUT, -ENOMEM, or
 *     the errno of the system call that failed). Functions that cannot fail return void or a
 *     value and say so.
 *   - On failure nothing changed, unless the function says otherwise, and
 *     hugepin_last_error() returns a one-line message naming the value at fault; it belongs to
 *     the calling thread and stays valid until that thread's next call into hugepin.
 *   - No C++ exception, signal or abort crosses this interface.
 *   - Handles are opaque. A handle is used by one thread at a time (the caller serializes);
 *     different handles may be used from different threads.
 *   - Out-parameters are written only on success.
 *   - Structures passed in start with `struct_size`, set to sizeof the structure the caller was
 *     compiled with (the *_INIT macros do it): later versions add fields at the end only, and a
 *     library reads only the fields the caller's size covers. NULL means "all defaults".
 *
 * Versions: HUGEPIN_VERSION_* is what the caller compiled against; hugepin_version() is the
 * library it runs with. The shared object's SONAME (libhugepin.so.0) changes only when this
 * interface breaks.
 */
#ifndef HUGEPIN_HUGEPIN_H
#define HUGEPIN_HUGEPIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HUGEPIN_VERSION_MAJOR 0
#define HUGEPIN_VERSION_MINOR 3
#define HUGEPIN_VERSION_PATCH 0
/* One number that compares in release order: 0.3.0 is 300. */
#define HUGEPIN_VERSION (HUGEPIN_VERSION_MAJOR * 10000 + HUGEPIN_VERSION_MINOR * 100 + HUGEPIN_VERSION_PATCH)

#if defined(__GNUC__)
#define HUGEPIN_API __attribute__((visibility("default")))
#else
#define HUGEPIN_API
#endif

/* ---------------------------------------------------------------------------------------------
 * Library
 * ------------------------------------------------------------------------------------------- */

/* The library's version as one number (HUGEPIN_VERSION of the build that made it). */
HUGEPIN_API int hugepin_version(void);
/* "0.3.0". Static storage; never NULL. */
HUGEPIN_API const char* hugepin_version_string(void);
/* The message of the calling thread's last failure ("" when none). Never NULL. */
HUGEPIN_API const char* hugepin_last_error(void);

typedef uint32_t hugepin_chunk_id; /* 0 .. chunk_count - 1, the same on every rank */
typedef uint64_t hugepin_job_id;   /* from 1, never reused by one scheduler */
typedef uint64_t hugepin_epoch;    /* the scheduler's compute epochs, from 1 */

typedef enum hugepin_job_kind {
  HUGEPIN_LOAD = 0,  /* host -> GPU: the ranks read the job's chunks */
  HUGEPIN_STORE = 1, /* GPU -> host: the ranks write the job's chunks */
} hugepin_job_kind;

/* ---------------------------------------------------------------------------------------------
 * Plans: from the engine's KV tensors to one chunk count and each rank's region.
 * ------------------------------------------------------------------------------------------- */

typedef struct hugepin_plan hugepin_plan;

/* Plans `json` (the planner's input format, docs/planner.md: tp, pp, blocks_per_chunk,
 * cpu_bytes, and each rank's KV tensors or bytes_per_block) on this host (its hugepage pool and
 * the NUMA node of each rank's GPU). `length` is the text's length in bytes. Fails with -EINVAL
 * and a message naming the JSON path at fault for malformed or invalid input, and when the chunk
 * count does not fit hugepin_chunk_id. Free the plan with hugepin_plan_free. */
HUGEPIN_API int hugepin_plan_from_json(const char* json, size_t length, hugepin_plan** out);
/* Frees a plan; NULL is a no-op. */
HUGEPIN_API void hugepin_plan_free(hugepin_plan* plan);

typedef struct hugepin_plan_info {
  uint32_t tp;
  uint32_t pp;
  uint32_t chunk_count;
  uint64_t blocks_per_chunk;
  uint64_t page_size;              /* the page size the plan chose */
  uint64_t payload_bytes_per_block; /* over all ranks */
  uint64_t region_bytes;           /* over all ranks */
} hugepin_plan_info;

HUGEPIN_API int hugepin_plan_get_info(const hugepin_plan* plan, hugepin_plan_info* out);
/* The plan as JSON (`hugepin plan --json`). Writes at most `capacity` bytes with a terminating
 * NUL into `buffer` and the full length without the NUL into *length; a buffer too small (or
 * NULL with capacity 0) fails with -ENOSPC after setting *length, so a caller can size it. */
HUGEPIN_API int hugepin_plan_to_json(const hugepin_plan* plan, char* buffer, size_t capacity, size_t* length);

/* ---------------------------------------------------------------------------------------------
 * Arenas: one region per rank (hugetlbfs, or 4 KiB shared memory when no pool can serve) and a
 * control segment /dev/shm/hugepin.<name>. Names: 1-64 of [A-Za-z0-9._-], not starting with '.'.
 * ------------------------------------------------------------------------------------------- */

typedef struct hugepin_arena_options {
  uint32_t struct_size;
  uint32_t ring_capacity;  /* reports per rank ring, a power of two; 0: 4096 */
  uint64_t page_size;      /* 0: the plan's page size; 4096, 2 MiB or 1 GiB to force one */
  int strict;              /* nonzero: any fallback (page size, node) fails the create */
  unsigned prefault_threads; /* per node; 0: the node's CPUs, at most 16 */
} hugepin_arena_options;
#define HUGEPIN_ARENA_OPTIONS_INIT {sizeof(hugepin_arena_options), 0, 0, 0, 0}

/* Creates arena `name` with the regions of `plan`, prefaulted and placed on their nodes. Fails
 * with -EEXIST when the arena exists; a failure leaves nothing behind. Most engines create the
 * arena through hugepin_scheduler_create instead, which also takes the scheduler role. */
HUGEPIN_API int hugepin_arena_create(const char* name, const hugepin_plan* plan, const hugepin_arena_options* options);
/* Removes the arena's control segment and every region file. Mappings that live processes hold
 * stay valid until they unmap. -ENOENT when there is no such arena. */
HUGEPIN_API int hugepin_arena_destroy(const char* name);

typedef struct hugepin_arena_info {
  uint32_t tp;
  uint32_t pp;
  uint32_t ranks;          /* tp * pp */
  uint32_t chunk_count;
  uint64_t blocks_per_chunk;
  uint32_t ring_capacity;
  int32_t creator_pid;
} hugepin_arena_info;

/* What arena `name` holds, read from its control segment (read-only). -ENOENT: no such arena;
 * -EACCES: not readable by the caller; -EINVAL: the segment is corrupt or another version. */
HUGEPIN_API int hugepin_arena_get_info(const char* name, hugepin_arena_info* out);

/* One rank's host memory, for the copy engine and for an RDMA engine (UCX, NIXL) that registers
 * the same memory. `base` is valid in the process that asked, while its handle lives. */
typedef struct hugepin_region_info {
  void* base;
  uint64_t length;     /* the whole region: a multiple of page_size */
  uint64_t page_size;  /* as obtained: 4096 (the shared-memory fallback), 2 MiB or 1 GiB */
  int32_t numa_node;   /* the node holding most of its pages; -1 when unknown */
  int32_t pinned;      /* 1 once registered for a GPU in this process */
  int32_t device;      /* the GPU it is pinned for; -1 when not pinned */
  uint32_t rank;       /* flat rank: pp_rank * tp + tp_rank */
  uint32_t segments;   /* KV segments laid out in the region (see hugepin_segment_info) */
} hugepin_region_info;

/* Where segment `index` of a rank's KV lives in its region: all blocks of segment 0 first, then
 * all of segment 1, and so on. Host block h of the segment (h = chunk * blocks_per_chunk + b)
 * starts at base + host_offset + h * host_block_stride. */
typedef struct hugepin_segment_info {
  uint64_t bytes_per_block;
  uint64_t host_offset;
  uint64_t host_block_stride;
  uint64_t host_blocks; /* chunk_count * blocks_per_chunk */
} hugepin_segment_info;

/* ---------------------------------------------------------------------------------------------
 * Workers: one per rank process.
 * ------------------------------------------------------------------------------------------- */

typedef struct hugepin_worker hugepin_worker;

typedef struct hugepin_worker_options {
  uint32_t struct_size;
  uint32_t copy_threads;   /* host-memcpy backend: CPU threads per copy; 0: 1 */
  int64_t post_timeout_ns; /* how long a report waits for room in a full ring; 0: 1 s */
  /* Nonzero: time each job's copies (hugepin_job_result.copy_ns, gpu_done_ns) with two timing
   * events around them on the GPU. Timing events slow the copies beside them: with four rank
   * processes on one H200 under MPS, timing every job moved 14-25% less in rows of mixed stores and
   * loads than timing one in eight (docs/performance.md). Leave 0 unless the GPU time is wanted. */
  int32_t time_copies;
  /* GPU backend: how the worker learns that a job's copies landed. 0: a thread sleeps on each
   * job's event until the driver wakes it (no polling, but the driver's own event thread works
   * for every job; on an H200 host it heard 34-78 us after the copies ended at the median, up to
   * ~400 us at p99). > 0: that thread asks the event every this many ns while a job waits and
   * hears about that late (nothing while no job waits). With four rank processes on one H200,
   * polling every 50 us used 0.6-1.2x the CPU per job that sleeping did, heard within 54-70 us
   * at p99, and moved up to 10 points more of the copy engine's rate (delays read with a GPU clock
   * since found to run 10-30 us late: each is that much longer). An engine that collects
   * results once per step can keep 0; one that settles jobs as they land polls, 10-50 us.
   * HUGEPIN_COMPLETION_SPIN: that thread asks back to back, no sleep between, while any job
   * waits: it hears within a query's time of the copies landing, for a CPU core kept busy while
   * jobs are out (none while none is). On the H200 host, one rank alone: the scheduler saw jobs
   * settle 29-69 us after their copies ended at p99 (polling every 50 us: 80-123). Libraries
   * before 0.3.0 refuse it (EINVAL). Polling or spinning, one thread serves all of the worker's
   * streams, and a timed job's completion waits on its end timing event itself. */
  int64_t completion_poll_ns;
  /* With time_copies: time one job in this many (0 and 1: every job), chosen from the job's id so
   * that every rank times the same jobs; the others report copy_ns and gpu_done_ns 0. The timing
   * events' cost (above) then falls on that share of the jobs: `hugepin bench offload` times one
   * job in 8. A library older than this header ignores the field and times every job. */
  uint32_t time_copies_every;
} hugepin_worker_options;
#define HUGEPIN_WORKER_OPTIONS_INIT {sizeof(hugepin_worker_options), 0, 0, 0, 0, 0}
/* hugepin_worker_options.completion_poll_ns: spin instead of polling (since 0.3.0). */
#define HUGEPIN_COMPLETION_SPIN (-1)

/* Attaches rank (tp_rank, pp_rank) of arena `arena`: claims the rank (-EBUSY while a live
 * process holds it; a dead holder's claim is taken over), maps its region read-write and
 * announces the process to the scheduler. -ENOENT: no such arena; -ERANGE: no such rank. */
HUGEPIN_API int hugepin_worker_attach(const char* arena, uint32_t tp_rank, uint32_t pp_rank,
                                      const hugepin_worker_options* options, hugepin_worker** out);
/* Detaches (tells the scheduler, gives the rank back), waits for every copy in flight, unpins,
 * unmaps and frees the handle; NULL is a no-op. Returns the first failure (the handle is freed
 * all the same). A forked child must not detach its parent's worker. */
HUGEPIN_API int hugepin_worker_detach(hugepin_worker* worker);

/* Page-locks the region and maps it for GPU `device` (cudaHostRegister, in chunks of at most
 * 64 GiB, in parallel). -ENODEV: this build has no CUDA or the device cannot be used. A failure
 * leaves nothing pinned. */
HUGEPIN_API int hugepin_worker_pin(hugepin_worker* worker, int device);

HUGEPIN_API int hugepin_worker_get_region(const hugepin_worker* worker, hugepin_region_info* out);
/* -ERANGE when index >= region.segments. */
HUGEPIN_API int hugepin_worker_get_segment(const hugepin_worker* worker, uint32_t index, hugepin_segment_info* out);

/* One segment of the engine's own device KV cache: block b of the segment starts at
 * device_base + b * block_stride and holds bytes_per_block bytes (which must equal the arena's
 * bytes_per_block for that segment). */
typedef struct hugepin_device_segment {
  uint64_t device_base;  /* device address (or a host address for the host backend) */
  uint64_t block_stride; /* bytes between consecutive device blocks, >= bytes_per_block */
  uint64_t blocks;       /* blocks the device side holds */
  uint64_t bytes_per_block;
} hugepin_device_segment;

typedef enum hugepin_backend {
  HUGEPIN_BACKEND_AUTO = 0, /* the GPU when the region is pinned, else host memcpy */
  HUGEPIN_BACKEND_GPU = 1,  /* CUDA: SM kernels for small blocks, batched DMA for large ones */
  HUGEPIN_BACKEND_HOST = 2, /* memcpy on CPU threads: no GPU (tests, CI); device_base is host memory */
} hugepin_backend;

/* Builds the copy engine over the engine's device KV: `count` segments, in the arena's segment
 * order. Replaces an earlier engine (after waiting for its copies, and on the GPU for the whole
 * device as it goes: call this at set-up, not between steps). -EINVAL naming the segment
 * when the count or a bytes_per_block differs from the arena's, or a stride is too small;
 * -ENODEV for HUGEPIN_BACKEND_GPU without a pinned region. */
HUGEPIN_API int hugepin_worker_set_device_kv(hugepin_worker* worker, const hugepin_device_segment* segments,
                                             size_t count, hugepin_backend backend);

/* A block copy: block `src` of every segment to block `dst` of the same segment. For a store
 * src is a device block and dst a host block; for a load src is a host block and dst a device
 * block. Host block of (chunk c, block b of the chunk) = c * blocks_per_chunk + b. */
typedef struct hugepin_block_pair {
  uint64_t src;
  uint64_t dst;
} hugepin_block_pair;

/* Enqueues job `job`'s copies, device -> host (store) or host -> device (load), on `stream` (a
 * cudaStream_t; NULL: the worker's own low-priority stream for that direction) and returns. When
 * they have landed, the worker records the job finished and posts its copy-complete report to
 * the scheduler. A bad request (a pair out of range: -ERANGE naming it; no device KV set:
 * -EINVAL) copies nothing and posts nothing. When the GPU refuses the launch, nothing of it
 * stays in flight, the job is reported copy-failed, and the call returns the error. */
HUGEPIN_API int hugepin_worker_store(hugepin_worker* worker, hugepin_job_id job, const hugepin_block_pair* pairs,
                                     size_t count, void* stream);
HUGEPIN_API int hugepin_worker_load(hugepin_worker* worker, hugepin_job_id job, const hugepin_block_pair* pairs,
                                    size_t count, void* stream);
/* Posts job `job`'s report without copying anything: copy-complete when `error` is 0, else
 * copy-failed with `error` (a positive errno). For a job this rank will not launch (the engine
 * refused its request, or moved the bytes by other means), so that the job settles at the
 * scheduler (completes, or fails naming this rank) instead of holding its chunks forever. A job
 * launched here reports by itself: posting for it too is a second report, which the scheduler
 * rejects and counts. -EINVAL for job 0 or a negative `error`. */
HUGEPIN_API int hugepin_worker_post_done(hugepin_worker* worker, hugepin_job_id job, int error);

/* Reports that this rank's GPU work up to `epoch` is done, once every copy launched before this
 * call has landed and, when `stream` is not NULL, once `stream` reaches the point of this call.
 * Epochs must increase. */
HUGEPIN_API int hugepin_worker_release(hugepin_worker* worker, hugepin_epoch epoch, void* stream);
/* Records a heartbeat (what hugepind and the inspector read). */
HUGEPIN_API int hugepin_worker_heartbeat(hugepin_worker* worker);

typedef struct hugepin_job_result {
  hugepin_job_id job;
  int32_t error;       /* 0, or the negative code of the copy's failure */
  uint32_t kind;       /* hugepin_job_kind */
  uint64_t bytes;      /* bytes the job moved on this rank */
  uint64_t launch_ns;  /* CLOCK_MONOTONIC at launch */
  uint64_t landed_ns;  /* when the worker learned that its copies landed */
  uint64_t copy_ns;    /* with time_copies: the copies' own GPU time (else 0) */
  uint64_t gpu_done_ns; /* with time_copies: when they ended, on CLOCK_MONOTONIC (else 0): the GPU's
                         * clock placed against the host's, right to within half a window; on an
                         * H200 with four processes' copies, windows were 12-26 us wide at the
                         * median, and up to 98 us in rows of mixed stores and loads that had just
                         * started (docs/performance.md). Both stay 0 for a job whose timing could
                         * not be read (a GPU fault, a clock with no origin yet): the job is
                         * reported all the same. */
} hugepin_job_result;

/* Moves up to `capacity` jobs whose copies have landed since the last call into `out`, oldest
 * first, and sets *count. Non-blocking. */
HUGEPIN_API int hugepin_worker_finished(hugepin_worker* worker, hugepin_job_result* out, size_t capacity,
                                        size_t* count);
/* Waits until job `job`'s copies have landed (-ETIMEDOUT after timeout_ns; negative: no limit).
 * The job stays in hugepin_worker_finished's list. -ENOENT: this worker never launched it. */
HUGEPIN_API int hugepin_worker_wait(hugepin_worker* worker, hugepin_job_id job, int64_t timeout_ns);
/* A descriptor that becomes readable when jobs have landed (for an event loop); reading 8 bytes
 * resets it. Owned by the worker. */
HUGEPIN_API int hugepin_worker_completion_fd(hugepin_worker* worker, int* fd);

/* ---------------------------------------------------------------------------------------------
 * Schedulers: one per engine scheduler process; the one consumer of every rank's ring.
 * ------------------------------------------------------------------------------------------- */

typedef struct hugepin_scheduler hugepin_scheduler;

typedef struct hugepin_scheduler_options {
  uint32_t struct_size;
  uint32_t max_jobs_in_flight;  /* 0: 4096 */
  int waive_compute_barrier;    /* nonzero: synchronous engines, holds alone decide reuse */
  int keep_arena;               /* nonzero: hugepin_scheduler_close does not destroy an arena it created */
  int64_t heartbeat_timeout_ns; /* a rank silent this long is declared unresponsive; 0: never */
} hugepin_scheduler_options;
#define HUGEPIN_SCHEDULER_OPTIONS_INIT {sizeof(hugepin_scheduler_options), 0, 0, 0, 0}

/* Creates arena `arena` from `plan` (as hugepin_arena_create) and takes its scheduler role. */
HUGEPIN_API int hugepin_scheduler_create(const char* arena, const hugepin_plan* plan,
                                         const hugepin_arena_options* arena_options,
                                         const hugepin_scheduler_options* options, hugepin_scheduler** out);
/* Takes the scheduler role of an existing arena (one hugepind keeps, or one created earlier).
 * -EBUSY naming the pid while another live process holds the role. */
HUGEPIN_API int hugepin_scheduler_adopt(const char* arena, const hugepin_scheduler_options* options,
                                        hugepin_scheduler** out);
/* Gives the role back, destroys the arena when this handle created it (unless keep_arena), and
 * frees the handle; NULL is a no-op. */
HUGEPIN_API int hugepin_scheduler_close(hugepin_scheduler* scheduler);

HUGEPIN_API int hugepin_scheduler_get_info(const hugepin_scheduler* scheduler, hugepin_arena_info* out);

/* Pins every listed chunk (a copy hold) and opens a job that every rank must report; send the
 * job to the ranks only after this returns. -EINVAL when `count` is 0; -ERANGE naming a chunk
 * out of range; -EBUSY when a chunk is retired or quarantined, a rank is not live, or
 * max_jobs_in_flight jobs are open. */
HUGEPIN_API int hugepin_scheduler_dispatch(hugepin_scheduler* scheduler, hugepin_job_kind kind,
                                           const hugepin_chunk_id* chunks, size_t count, hugepin_job_id* job);
/* Applies every report waiting on the rings. When there is none, first waits up to `timeout_ns`
 * (0: do not wait; negative: no limit) for progress: enough reports that a job could reach
 * quorum or the all-rank epoch advance (a retired chunk pass the fence), or a rank failing a
 * copy, attaching or detaching.
 * (Reports that settle nothing alone, such as the first ranks' reports of a job, wait on the
 * rings meanwhile: the ranks wake the scheduler about once per job, not once per report.) Then
 * notices rank processes that exited (their jobs fail; their chunks stay quarantined until the
 * process is gone). Sets *applied (may be NULL) to the number of reports applied. Returns 0
 * also when the time ran out. */
HUGEPIN_API int hugepin_scheduler_drain(hugepin_scheduler* scheduler, int64_t timeout_ns, size_t* applied);
/* Moves up to `capacity` completed jobs (every rank reported them) into `out`, oldest first. */
HUGEPIN_API int hugepin_scheduler_completed(hugepin_scheduler* scheduler, hugepin_job_id* out, size_t capacity,
                                            size_t* count);

typedef struct hugepin_failed_job {
  hugepin_job_id job;
  uint32_t kind;      /* hugepin_job_kind */
  uint32_t rank;      /* the flat rank that failed it */
  int32_t cause;      /* 0: the rank reported copy-failed; 1: the rank stopped answering */
  int32_t error;      /* the rank's errno for a failed copy, else 0 */
  char message[200];  /* one line, NUL-terminated (truncated when longer) */
} hugepin_failed_job;

/* Moves up to `capacity` failed jobs into `out`. A failed job's chunks may still be held; they
 * come back through retire and the fence as any chunk does. */
HUGEPIN_API int hugepin_scheduler_failed(hugepin_scheduler* scheduler, hugepin_failed_job* out, size_t capacity,
                                         size_t* count);
/* The engine gives chunk `chunk` up (evicted). -ERANGE: out of range; -EINVAL: already retired. */
HUGEPIN_API int hugepin_scheduler_retire(hugepin_scheduler* scheduler, hugepin_chunk_id chunk);
/* Closes the current compute epoch; sets *epoch (may be NULL) to the new one. */
HUGEPIN_API int hugepin_scheduler_begin_epoch(hugepin_scheduler* scheduler, hugepin_epoch* epoch);
/* Moves up to `capacity` chunks that became reusable (no holds, fence passed) into `out`; each is
 * the engine's again. */
HUGEPIN_API int hugepin_scheduler_reusable(hugepin_scheduler* scheduler, hugepin_chunk_id* out, size_t capacity,
                                           size_t* count);

typedef struct hugepin_scheduler_figures {
  uint32_t live_ranks;
  uint32_t pinned_chunks;
  uint32_t quarantined_chunks;
  uint32_t jobs_waiting;
  hugepin_epoch current_epoch;
  hugepin_epoch all_rank_epoch;
  uint64_t jobs_dispatched;
  uint64_t jobs_completed;
  uint64_t jobs_failed;
  uint64_t reports_applied;
  uint64_t reports_rejected;
} hugepin_scheduler_figures;

HUGEPIN_API int hugepin_scheduler_get_figures(const hugepin_scheduler* scheduler, hugepin_scheduler_figures* out);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPIN_HUGEPIN_H */
