// WorkerSession: one engine worker's side of hugepin, one per rank process.
//
//   WorkerSession worker(real_os(), "kv", tp_rank, pp_rank);  // attach: claim the rank, map its region
//   worker.pin(device);                                       // page-lock it for the GPU
//   worker.set_device_kv(segments, WorkerBackend::kAuto);     // the engine's own device KV buffers
//   worker.store(job, pairs, stream);                         // returns at once; the copy-complete
//   worker.load(job, pairs, stream);                          //   report is posted when they land
//   worker.release(epoch, compute_stream);                    // compute-release for the fence
//
// Completion is pushed, not polled: behind each job's copies the session queues a call that the
// copy engine runs as soon as they have landed (an event its thread waits on, asleep; the stream
// runs on); it records the job finished and posts its copy-complete (or copy-failed) report on
// the rank's ring right there. The host-memcpy backend copies inside
// store()/load() and posts before returning. A release is posted once every copy launched before
// it has landed (and its stream, when given, reached it).
//
// Reports are never dropped: when the ring is full, what did not fit waits in the session, in
// order, and a backlog thread posts it as the scheduler drains the ring.
//
// Thread-safety: store, load, release, set_device_kv, pin and detach from one thread at a time
// (the engine's worker thread); take_finished, wait, heartbeat and the observers from any
// thread. Not movable: the completion calls hold its address.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/os.h"
#include "dma/copy_engine.h"
#include "dma/pinning.h"
#include "ipc/rank_attachment.h"
#include "protocol/offload_types.h"
#include "session/chunk_geometry.h"

namespace hugepin {

enum class WorkerBackend : uint8_t {
  kAuto = 0,  // the GPU when the region is pinned, else host memcpy
  kGpu = 1,   // the CUDA copy engine (requires pin())
  kHost = 2,  // memcpy on CPU threads; device segments are host memory
};

struct WorkerSessionOptions {
  AttachOptions attach;
  // The copy engine's tuning (device, host_split_* and host_threads are set by the session).
  CopyEngineOptions engine;
  // Threads that register the region in pin().
  unsigned pin_threads = 4;
  // Measure each job's copies (CopyEngine::mark: timing events around them on the GPU): what
  // JobResult::copy_ns and gpu_done_ns report. Costs two event records per job, and the GPU's
  // copies slow down around timing events: on the H200 host, four rank processes on one GPU moved
  // 14-25% less in rows of mixed stores and loads with every job timed than with one in eight, under
  // MPS (docs/performance.md).
  bool time_copies = false;
  // With time_copies: time one job in this many (0 and 1: every job), chosen by copies_timed() from
  // the job's id, so that every rank times the same jobs and a job's slowest rank is known;
  // untimed jobs report 0 for both.
  uint32_t time_copies_every = 1;
};

// Whether `job` is among the one job in `every` that is timed (0 and 1: every job): chosen by a hash
// of the id, not its residue, since ids count up one by one and a scheduler that alternates stores
// and loads would otherwise time one direction only.
bool copies_timed(JobId job, uint32_t every);

// What became of one job on this rank.
struct JobResult {
  JobId job = 0;
  JobKind kind = JobKind::kLoad;
  int error = 0;           // 0, or the errno of the copy's failure
  uint64_t bytes = 0;      // bytes the job moved on this rank
  int64_t launch_ns = 0;   // CLOCK_MONOTONIC
  int64_t landed_ns = 0;   // when the session learned that its copies landed
  // With WorkerSessionOptions::time_copies (else 0): the copies' own time on the GPU (from
  // their start to their end, excluding any wait for earlier work on the stream), and when they
  // ended, on CLOCK_MONOTONIC (the GPU's clock calibrated against it, dma/gpu_clock.h: right to
  // within half of gpu_done_window_ns; 0 on the host backend, whose clock is the host's). All
  // three stay 0 when the timing could not be read (a GPU fault, the clock not placed); the job's
  // result is returned all the same, and the first such failure is logged.
  int64_t copy_ns = 0;
  int64_t gpu_done_ns = 0;
  int64_t gpu_done_window_ns = 0;
};

// The rank's host memory, for an RDMA engine that registers the same memory.
struct RegionInfo {
  std::byte* base = nullptr;
  uint64_t bytes = 0;
  uint64_t page_size = 0;
  int numa_node = -1;  // where most of its pages are, as created; -1: unknown
  bool pinned = false;
  int device = -1;
  uint32_t rank = 0;
};

class WorkerSession {
 public:
  // Attaches rank (tp_rank, pp_rank) of arena `arena` (RankAttachment::attach) and reads the
  // arena's chunk geometry. Throws Error: no such arena (ENOENT), no such rank (ERANGE), the rank
  // held by a live process (EBUSY), a segment that cannot be read.
  WorkerSession(Os& os, std::string_view arena, uint32_t tp_rank, uint32_t pp_rank,
                const WorkerSessionOptions& options = {});
  // Detaches when still attached; failures are logged, not thrown.
  ~WorkerSession();
  WorkerSession(const WorkerSession&) = delete;
  WorkerSession& operator=(const WorkerSession&) = delete;

  // Registers the whole region for GPU `device` (dma/pinning.h), publishing progress in the
  // rank's record. Throws Error (ENODEV without CUDA); on failure nothing stays pinned.
  void pin(int device);
  // Builds the copy engine over `segments`, the engine's device KV in the arena's segment order
  // (ChunkGeometry::segment_views checks them). Waits for the copies of an earlier engine first,
  // and on the GPU for the whole device once the earlier engine goes (kernels it launched on
  // callers' streams may still read what it frees): call it at set-up, not between steps.
  // Throws Error (EINVAL naming the segment; ENODEV for kGpu without pin()).
  void set_device_kv(std::span<const DeviceSegment> segments, WorkerBackend backend);

  // Enqueues job `job`'s copies (see ChunkGeometry for the pairs; a store's src is a device
  // block, a load's src a host block) on `stream` (a cudaStream_t; null: the engine's own). A bad
  // request throws Error (ERANGE naming the pair, EINVAL without device KV) and posts nothing.
  // When the GPU refuses part of the launch, nothing of it stays in flight, the job is posted
  // copy-failed, and Error is thrown.
  void store(JobId job, std::span<const BlockPair> pairs, void* stream = nullptr);
  void load(JobId job, std::span<const BlockPair> pairs, void* stream = nullptr);
  // Posts compute-release for `epoch` once every copy launched before this call has landed and,
  // when `stream` is given, `stream` has reached this point. Throws Error (EINVAL) unless epochs
  // increase.
  void release(Epoch epoch, void* stream = nullptr);
  // Posts job `job`'s copy-complete report (copy-failed with `error`, an errno, when nonzero) for
  // copies the engine made by its own means (a disk tier, another transport). Any thread.
  void post_job_done(JobId job, int error = 0);
  // Records a heartbeat and posts one when the ring has room.
  void heartbeat();

  // Moves up to `max` results of landed jobs into `out`, oldest first; returns how many.
  size_t take_finished(std::vector<JobResult>* out, size_t max = SIZE_MAX);
  // True once job `job` has landed (it stays for take_finished); false when `timeout_ns`
  // (negative: no limit) passes first. Throws Error (ENOENT) for a job this session never launched.
  bool wait(JobId job, int64_t timeout_ns);
  // An eventfd that turns readable when jobs land (read 8 bytes to reset it). Owned here.
  int completion_fd();
  // Copies launched and not yet landed.
  size_t in_flight() const;

  // Waits for every copy, posts what is pending and kDetach, gives the rank back, unpins. Throws
  // Error when a report cannot be posted (the rank is given back all the same).
  void detach();
  bool attached() const { return attachment_.attached(); }

  // The copy engine set_device_kv built (Error EINVAL before it): for tools that copy without
  // reports, such as the benchmarks' baselines. Copies launched on it directly are not this
  // session's: no report, no release waits for them.
  CopyEngine& engine();

  const ChunkGeometry& geometry() const { return geometry_; }
  const RankGeometry& rank_geometry() const { return geometry_.rank(attachment_.rank()); }
  RegionInfo region() const;
  const RankAttachment& attachment() const { return attachment_; }

 private:
  struct Landing;  // one enqueued copy or release, until its completion call ran
  struct Release {
    Epoch epoch;
    uint64_t copies_before;  // copy sequence numbers below this must have landed
    bool stream_reached;
  };

  void launch(JobKind kind, JobId job, std::span<const BlockPair> pairs, void* stream);
  static void landed_call(void* landing, int error);
  void copy_landed(Landing* landing, int error);
  void release_reached(Landing* landing);
  void record_landed(uint64_t sequence);
  void post_releases_locked();
  void post_locked(const Report& report);
  void flush_backlog_locked();
  void run_backlog();
  void wait_all_landed();

  Os* os_;
  WorkerSessionOptions options_;
  RankAttachment attachment_;
  ChunkGeometry geometry_;
  PinnedRegion pinned_;
  int device_ = -1;
  std::unique_ptr<CopyEngine> engine_;
  bool engine_is_host_ = false;

  mutable std::mutex mutex_;  // everything below, and the ring's producer side
  std::condition_variable changed_;         // a job landed, a completion call ran
  std::condition_variable backlog_wanted_;  // the backlog thread's own: reports wait, or stop
  uint64_t next_copy_ = 1;                 // sequence number of the next copy launched
  std::deque<bool> copies_landed_;         // from first_unlanded_ on
  uint64_t first_unlanded_ = 1;
  std::deque<Release> releases_;
  Epoch last_epoch_ = 0;
  size_t calls_pending_ = 0;               // completion calls enqueued and not yet run
  std::unordered_map<JobId, JobResult> in_flight_;
  std::unordered_map<JobId, JobResult> landed_;  // until taken
  std::unordered_map<JobId, std::pair<uint64_t, uint64_t>> marks_;  // time_copies: start, end
  std::deque<JobId> landed_order_;
  std::deque<Report> backlog_;             // reports that found the ring full, in order
  bool stopping_ = false;
  std::atomic<int> completion_fd_{-1};
  std::atomic<bool> timing_warned_{false};  // take_finished() logged a timing it could not read
  std::thread backlog_thread_;
};

}  // namespace hugepin
