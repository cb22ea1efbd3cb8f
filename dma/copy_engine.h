// The block copy engine a worker uses: GPU <-> host copies of block pairs over segment views.
//
// One engine per worker (per GPU). launch() enqueues and returns at once (the GPU engines) or
// after copying (the host engine); the returned completion says when the bytes have landed, the
// way the worker seed tracks CUDA events. Completions of one direction finish in launch order.
//
// Thread-safety: one thread launches; completions may be polled from that thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dma/copy_types.h"
#include "dma/copy_units.h"

namespace hugepin {

// How the bytes move.
enum class CopyBackend : uint8_t {
  kAuto = 0,     // chosen per launch by direction and block size (CopyEngineOptions thresholds)
  kDmaBatch,     // cudaMemcpyBatchAsync over spans, contiguous runs merged
  kDmaPerBlock,  // one cudaMemcpyAsync per span: what engines do today (a baseline)
  kSmLoadStore,  // an SM kernel over mapped host memory: warps with 16-byte loads in flight
  kSmBulk,       // an SM kernel driving Hopper's bulk async copies (TMA) through shared memory
  kHost,         // memcpy on CPU threads: no GPU (tests, CI, demo)
};

std::string_view backend_name(CopyBackend backend);
// Parses "auto", "dma-batch", "dma-per-block", "sm", "sm-bulk", "host". Throws Error naming text.
CopyBackend parse_backend(std::string_view text);

// The timer slack (prctl(PR_SET_TIMERSLACK)) of a thread that polls copy events, sleeping between
// polls: the kernel's default, 50 us, would stretch each sleep by more than the sleep itself.
inline constexpr uint64_t kCompletionPollSlackNs = 1000;

struct CopyEngineOptions {
  int device = 0;
  // The SM kernels run on at most this many thread blocks (one SM each at most).
  unsigned sm_blocks = 4;
  // kAuto uses an SM kernel for blocks smaller than these (bytes), DMA otherwise; measured on
  // the GPU host (docs/performance.md) and overridable.
  uint64_t auto_sm_below_h2d = 1 << 20;
  uint64_t auto_sm_below_d2h = 1 << 20;
  // Which SM kernel kAuto uses.
  CopyBackend auto_sm_kernel = CopyBackend::kSmLoadStore;
  // SM kernels: at most this many bytes per kernel, a launch being cut into several kernels; 0: no
  // cut by bytes (a launch still runs as several kernels when its pairs travel in kernels'
  // parameters, 240 at most each, see sm_carried_pairs_max; and an uploaded list of more than 4096
  // pairs as one kernel per batch uploaded: 4096, 8192, ... up to 65536 pairs, so that copying
  // starts before the whole list is staged). With a slice, kernels also end at those batch
  // boundaries. An SM that a copy kernel holds returns to compute only when the kernel ends, and a
  // GEMM that sizes its grid to every SM waits for it: on the H200, copies of 16 KiB blocks by one
  // kernel per 512 MiB slowed a bf16 GEMM loop by 35%; 1 MiB kernels by 0.6%, but they move 4 KiB
  // blocks at 38 GB/s instead of 47 when the GPU is otherwise idle (docs/performance.md). The
  // default favours copy rate; set this where copies overlap compute.
  uint64_t sm_slice_bytes = 0;
  // SM kernels: a launch of up to this many pairs carries them in its kernels' parameters, cut into
  // kernels of at most 240 pairs each (dma/copy_units.h, kInlinePairs), in even shares; a larger
  // one uploads its pair list first. A carried list needs no copy before its kernel, and with four
  // rank processes on one H200 such an upload cost more than the copy it served
  // (docs/performance.md, "Copy launches that never wait"). Values below 240 count as 240.
  uint64_t sm_carried_pairs_max = 16 * kInlinePairs;
  // SM kernels: uploaded pair lists (launches of more than sm_carried_pairs_max pairs) go up from
  // pinned memory of the engine's. This is how many uploaded lists may be queued per direction, on
  // every stream together (callers' included), before launch() and enqueue() wait asleep for one to
  // be done (0 counts as 1). A list that is done but queued behind an unfinished older one on
  // another stream still counts until the limit is reached. Each list holds pinned and device
  // memory (16 KiB at least, or its size), allocated as the queue first grows that deep and kept
  // for the engine's life.
  size_t sm_launches_queued = 256;
  // Host spans never cross a multiple of this many bytes from host_split_base. Set them from the
  // PinnedRegion (its host() and chunk_bytes()) when the host memory was pinned in chunks: the
  // DMA backends refuse a span that crosses two registrations (cudaErrorInvalidValue, measured
  // on the H200 host), for cudaMemcpyAsync and cudaMemcpyBatchAsync alike.
  uint64_t host_split_base = 0;
  uint64_t host_split_bytes = 0;
  // Host engine: copy threads.
  unsigned host_threads = 1;
  // CUDA engine: how completion calls (when_done) learn that their copies ended. 0: the engine's
  // thread sleeps until the driver wakes it (a blocking-sync event: no polling, but the driver's
  // event thread works as each fires; on the H200 host the call ran 34-78 us after the copies
  // ended at the median, 271-400 us at p99, by a GPU clock since found to run 10-30 us late there,
  // docs/performance.md). > 0: it asks the event every
  // this many ns while calls wait, sleeping between; such events are not blocking-sync. On the
  // H200 host, with four rank processes on one GPU, polling every 50 us used 0.6-1.2x the CPU per
  // job of sleeping, and `hugepin bench offload` moved 1-10 points more of the copy engine's rate.
  int64_t completion_poll_ns = 0;
  // CUDA engine: true, the engine's thread asks the events back to back while calls wait, with no
  // sleep between (completion_poll_ns is then not read): a call runs within a query's time of its
  // copies ending, for a CPU core kept busy while any call waits, and nothing while none does.
  bool completion_spin = false;
};

class CopyCompletion {
 public:
  virtual ~CopyCompletion() = default;
  // Non-blocking: true once every byte of the launch has landed.
  virtual bool done() = 0;
  // Blocks until done(); throws Error when the copy failed.
  virtual void wait() = 0;
};

class CopyEngine {
 public:
  virtual ~CopyEngine() = default;

  // Enqueues the copy of every pair over every view in `direction` with `backend`. Throws Error
  // (enqueuing nothing) for a bad request: a pair out of range, a view an SM kernel cannot
  // align (SM kernels need 16-byte aligned bases, strides and block sizes; kAuto then uses DMA).
  // When the GPU refuses part of a launch, it waits for what was already enqueued, then throws:
  // after a throw nothing of the launch is in flight.
  virtual std::unique_ptr<CopyCompletion> launch(Direction direction, std::span<const BlockPair> pairs,
                                                 CopyBackend backend = CopyBackend::kAuto) = 0;
  // As launch(), on `stream` (a cudaStream_t of the caller's; null: the engine's own stream for
  // `direction`), with no completion object: follow it with when_done() to learn when it landed.
  // The host engine copies before it returns and ignores `stream`.
  virtual void enqueue(Direction direction, std::span<const BlockPair> pairs, CopyBackend backend, void* stream) = 0;
  // Calls fn(context, error) once everything enqueued on `stream` (null: the engine's stream for
  // `direction`) before this call has completed, without holding the stream up: on the GPU
  // engines a thread of the engine's waits for an event recorded here (dma/completion_watcher.h)
  // and runs fn, which must be quick; the host engine calls it right now. error is 0, or EIO
  // when that work failed. fn runs exactly once when this returns; not at all when it throws
  // Error, which it does only after waiting for everything enqueued on the stream.
  using CompletionCall = void (*)(void* context, int error);
  virtual void when_done(Direction direction, void* stream, CompletionCall fn, void* context) = 0;
  // Timing marks: mark() records a point on `stream` (null: the engine's stream for `direction`)
  // and returns its id; once the work enqueued before a later mark has completed, span(start,
  // end) gives the time between the two marks and when the later one was reached, on
  // CLOCK_MONOTONIC, and forgets both. The GPU engines use timing events, placed on
  // CLOCK_MONOTONIC by dma/gpu_clock.h (end_window_ns: its error bar; from the first mark on, a
  // thread of the engine's keeps that clock calibrated with a one-thread kernel a second, twenty a
  // second while spans are read); the host engine, which copies inside enqueue(), the time of the
  // call. span() waits for the end mark: the
  // completion call that announced the work may run before the driver marks the event done.
  // Throws Error when an event cannot be recorded (mark(), after waiting for the stream's work, as
  // enqueue() does) or read, or for an unknown id.
  struct MarkSpan {
    int64_t elapsed_ns = 0;
    int64_t end_ns = 0;         // CLOCK_MONOTONIC
    int64_t end_window_ns = 0;  // end_ns is right to within half of this (GpuClock::Placed; 0: exact)
  };
  virtual uint64_t mark(Direction direction, void* stream) = 0;
  virtual MarkSpan span(uint64_t start, uint64_t end) = 0;
  // As when_done(), but behind `mark` (from mark(), not yet read by span(); call span() on it only
  // after fn ran): fn runs once the work enqueued on the mark's stream before the mark has
  // completed. A timed job's end mark then also tells that its copies landed, with no second
  // point on the stream after them (each point after the copies was measured to add tens of us
  // with four processes under MPS on the H200 host, docs/performance.md). Engines that wait
  // asleep (completion_poll_ns 0, completion_spin false) record a point of their own after the
  // mark: a thread sleeps only on a blocking-sync event, and timing events are not.
  // Throws Error for an unknown mark.
  virtual void when_reached(uint64_t mark, CompletionCall fn, void* context) = 0;
  // Non-blocking: true once the work enqueued on the mark's stream before `mark` has completed;
  // the mark stays for span(). Throws Error for an unknown mark, or when that work failed.
  virtual bool reached(uint64_t mark) = 0;
  // Waits for everything launched so far (the preemption flush of the worker seed).
  virtual void synchronize() = 0;
  // The backend kAuto picks for this engine's views in `direction`.
  virtual CopyBackend auto_backend(Direction direction) const = 0;
  virtual const std::vector<SegmentView>& views() const = 0;
};

// The host engine: SegmentView device addresses are plain host memory here.
std::unique_ptr<CopyEngine> make_host_copy_engine(std::vector<SegmentView> views, const CopyEngineOptions& options);

// The CUDA engine on options.device, with two low-priority streams (loads, stores). Throws Error
// when this build has no CUDA or the device cannot be used.
std::unique_ptr<CopyEngine> make_cuda_copy_engine(std::vector<SegmentView> views, const CopyEngineOptions& options);

// True when this build has CUDA and at least one device answers.
bool cuda_available();

}  // namespace hugepin
