// The CUDA copy engine: batched DMA, per-block DMA (a baseline), and the SM kernels, on two
// low-priority streams, one per direction.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <unordered_map>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <utility>

#include "base/contract.h"
#include "base/error.h"
#include "base/os.h"
#include "dma/copy_engine.h"
#include "dma/completion_watcher.h"
#include "dma/copy_plan.h"
#include "dma/cuda_check.h"
#include "dma/cuda_copy_kernels.cuh"
#include "dma/gpu_clock.h"

namespace hugepin {
namespace {

constexpr uint64_t kSmPieceBytes = 64 * 1024;  // a warp's unit of a large block (32-bit indices in the kernel)
constexpr uint32_t kBulkMaxStageBytes = 32 * 1024;
constexpr uint32_t kBulkSharedBudget = 192 * 1024;
constexpr size_t kBatchLimit = 8192;  // copies per cudaMemcpyBatchAsync call
// SM kernels: pairs uploaded before the first kernel of a launch, and the most in one upload.
constexpr uint64_t kFirstUploadPairs = 4096;
constexpr uint64_t kMaxUploadPairs = 65536;

// True once the work before `event` is done, false while it runs; throws Error (`what`) when it
// failed. NotReady is left as the thread's last error by the runtime: cleared here.
bool event_fired(cudaEvent_t event, const char* what) {
  const cudaError_t state = cudaEventQuery(event);
  if (state == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  check_cuda(state, what);
  return true;
}

class CudaCompletion final : public CopyCompletion {
 public:
  explicit CudaCompletion(cudaEvent_t event) : event_(event) {}
  ~CudaCompletion() override { cudaEventDestroy(event_); }
  CudaCompletion(const CudaCompletion&) = delete;
  CudaCompletion& operator=(const CudaCompletion&) = delete;

  bool done() override { return event_fired(event_, "copy failed"); }
  void wait() override { check_cuda(cudaEventSynchronize(event_), "copy failed"); }

 private:
  cudaEvent_t event_;
};

// The pair lists of SM launches too large to travel in kernels' parameters (more than
// CopyEngineOptions::sm_carried_pairs_max pairs): staged in pinned host memory and uploaded on the
// launch's stream. A slot is reused only after the event recorded behind its kernels has fired.
//
// A launch never waits for the GPU while fewer than `limit` lists of its direction are queued:
// when no free slot is large enough it takes a new one. The first version had four slots and
// waited (spinning, in cudaEventSynchronize) for the fifth launch's: a worker with more than four
// jobs of one direction queued blocked its caller, and burned a core, until the GPU had done one.
// At the limit, a launch takes back every slot that is done, or waits asleep (blocking-sync
// events) for the oldest; one whose list is larger than any free slot regrows one then, and
// cudaFree may wait for the whole device. Slots keep their size for the engine's life.
class PairSlots {
 public:
  explicit PairSlots(size_t limit) : limit_(std::max<size_t>(limit, 1)) {}
  ~PairSlots() {
    if (current_) free_.push_back(*current_);
    for (Slot& slot : in_use_) {
      cudaEventSynchronize(slot.event);
      free_.push_back(slot);
    }
    for (Slot& slot : free_) {
      if (slot.event != nullptr) cudaEventDestroy(slot.event);
      cudaFreeHost(slot.host);
      cudaFree(slot.device);
    }
  }
  PairSlots(const PairSlots&) = delete;
  PairSlots& operator=(const PairSlots&) = delete;

  // Takes a slot for `pair_count` pairs (see above) and returns where they will be on the device.
  // Pairs go up with upload_pairs(); record_after(stream) hands the slot back once the kernels
  // that read them are enqueued.
  const UnitPair* reserve(size_t pair_count) {
    // A launch that failed after reserve() waited its stream out: its slot is free.
    if (current_) free_.push_back(*std::exchange(current_, std::nullopt));
    reclaim();
    const size_t bytes = pair_count * sizeof(UnitPair);
    // A free slot large enough; else a new one while there are fewer than the limit (regrowing a
    // slot frees its buffers, and cudaFree may wait for the whole device); else, at the limit, a
    // free one regrown, once there is one.
    auto large_enough = [&] {
      return std::find_if(free_.begin(), free_.end(), [&](const Slot& slot) { return slot.capacity >= bytes; });
    };
    auto fits = large_enough();
    if (fits == free_.end()) {
      if (in_use_.size() + free_.size() < limit_) {
        free_.push_back(Slot{});
        fits = std::prev(free_.end());
      } else {
        if (free_.empty()) wait_for_a_slot();
        fits = large_enough();
        if (fits == free_.end()) fits = free_.begin();
      }
    }
    Slot slot = *fits;
    free_.erase(fits);
    if (bytes > slot.capacity) {
      const size_t capacity = std::max({bytes, slot.capacity * 2, kMinSlotBytes});
      if (slot.host != nullptr) cudaFreeHost(slot.host);
      if (slot.device != nullptr) cudaFree(slot.device);
      slot = Slot{nullptr, nullptr, 0, slot.event};
      try {
        check_cuda(cudaMallocHost(&slot.host, capacity), "allocating a pair list (host)");
        check_cuda(cudaMalloc(&slot.device, capacity), "allocating a pair list (device)");
      } catch (...) {
        free_.push_back(slot);  // capacity 0: allocated again when next taken; freed by the destructor
        throw;
      }
      slot.capacity = capacity;
    }
    current_ = slot;
    return static_cast<const UnitPair*>(slot.device);
  }

  // Stages `pairs` as pairs [first, first + pairs.size()) of the reserved slot and uploads them on
  // `stream`.
  void upload_pairs(std::span<const BlockPair> pairs, size_t first, cudaStream_t stream) {
    const Slot& slot = *current_;
    static_assert(sizeof(UnitPair) == sizeof(BlockPair));
    const size_t offset = first * sizeof(UnitPair);
    std::memcpy(static_cast<char*>(slot.host) + offset, pairs.data(), pairs.size_bytes());
    check_cuda(cudaMemcpyAsync(static_cast<char*>(slot.device) + offset, static_cast<char*>(slot.host) + offset,
                               pairs.size_bytes(), cudaMemcpyHostToDevice, stream),
               "uploading a pair list");
  }

  void record_after(cudaStream_t stream) {
    Slot& slot = *current_;
    if (slot.event == nullptr) {
      check_cuda(cudaEventCreateWithFlags(&slot.event, cudaEventDisableTiming | cudaEventBlockingSync),
                 "creating an event");
    }
    check_cuda(cudaEventRecord(slot.event, stream), "recording a pair list's event");
    in_use_.push_back(slot);
    current_.reset();
  }

 private:
  static constexpr size_t kMinSlotBytes = 16 * 1024;

  struct Slot {
    void* host = nullptr;
    void* device = nullptr;
    size_t capacity = 0;
    cudaEvent_t event = nullptr;
  };

  // At the limit with no slot free: takes back every slot whose kernels are done (on callers'
  // streams they may finish out of order), or else waits asleep for the oldest.
  void wait_for_a_slot() {
    for (auto it = in_use_.begin(); it != in_use_.end();) {
      if (!event_fired(it->event, "waiting for a pair list's slot")) {
        ++it;
        continue;
      }
      free_.push_back(*it);
      it = in_use_.erase(it);
    }
    if (!free_.empty()) return;
    check_cuda(cudaEventSynchronize(in_use_.front().event), "waiting for a pair list's slot");
    free_.push_back(in_use_.front());
    in_use_.pop_front();
  }

  // Frees the slots whose kernels are done, oldest first (cheap, every launch). Launches on
  // callers' streams may finish out of order: a later slot that is done waits for the older ones.
  void reclaim() {
    while (!in_use_.empty() && event_fired(in_use_.front().event, "waiting for a pair list's slot")) {
      free_.push_back(in_use_.front());
      in_use_.pop_front();
    }
  }

  const size_t limit_;
  std::deque<Slot> in_use_;  // in the order their events were recorded
  std::vector<Slot> free_;
  std::optional<Slot> current_;  // reserved, not yet recorded
};

// The views of one direction as the SM kernels walk them, for one piece size: on the device for
// the engine's life, uploaded when the engine is made.
struct ResidentViews {
  UnitLayout layout{};  // all but pair_count
  void* device = nullptr;
};

bool aligned16(std::span<const SegmentView> views) {
  for (const SegmentView& v : views) {
    if ((v.device_base | reinterpret_cast<uintptr_t>(v.host_base) | v.device_block_stride | v.host_block_stride |
         v.block_bytes) % 16 != 0) {
      return false;
    }
  }
  return true;
}

class CudaCopyEngine final : public CopyEngine {
 public:
  CudaCopyEngine(std::vector<SegmentView> views, const CopyEngineOptions& options)
      : views_(std::move(views)), options_(options), aligned_(aligned16(views_)) {
    check_cuda(cudaSetDevice(options_.device), cat("selecting GPU ", options_.device));
    int least = 0;
    int greatest = 0;
    check_cuda(cudaDeviceGetStreamPriorityRange(&least, &greatest), "reading stream priorities");
    // The lowest priority: copies yield to the engine's compute streams.
    for (cudaStream_t& stream : streams_) {
      check_cuda(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, least), "creating a copy stream");
    }
    uint64_t largest = 0;
    for (const SegmentView& view : views_) largest = std::max(largest, view.block_bytes);
    bulk_stage_bytes_ = static_cast<uint32_t>(std::clamp<uint64_t>((largest + 15) / 16 * 16, 16, kBulkMaxStageBytes));
    bulk_pipelines_ = std::clamp<uint32_t>(kBulkSharedBudget / (detail::kBulkStages * bulk_stage_bytes_), 1,
                                           detail::kBulkMaxPipelines);
    // Both forms of the bulk kernel: a launch asking for more than the default 48 KiB fails
    // (cudaErrorInvalidValue) for a kernel not told it may. The attribute belongs to the kernel,
    // not to this engine: every engine sets the same bound (a launch asks for at most the
    // budget), so that one made later for other blocks cannot lower it under an earlier one.
    static_assert(kBulkSharedBudget >= detail::kBulkStages * kBulkMaxStageBytes);
    for (const void* kernel : {reinterpret_cast<const void*>(detail::sm_bulk_kernel),
                               reinterpret_cast<const void*>(detail::sm_bulk_inline_kernel)}) {
      check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kBulkSharedBudget)),
                 "sizing the bulk copy kernel's shared memory");
    }
    check_cuda(cudaStreamCreateWithPriority(&upload_stream_, cudaStreamNonBlocking, greatest),
               "creating an upload stream");
    if (aligned_) upload_views();
    clock_ = GpuClock::of_device(options_.device);
    watcher_.emplace(options_.device, options_.completion_poll_ns, options_.completion_spin);
  }

  ~CudaCopyEngine() override {
    // Members go after this body: the completion calls must run while the streams still exist.
    watcher_.reset();
    for (cudaStream_t stream : streams_) {
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    }
    cudaStreamDestroy(upload_stream_);
    // Kernels on callers' streams read the views too, and nothing here records their end: wait
    // for the whole device before freeing them (an engine goes rarely; its caller's compute waits).
    (void)cudaDeviceSynchronize();
    for (ResidentViews& resident : resident_views_) cudaFree(resident.device);
    for (auto& [id, mark] : marks_) spare_events_.push_back(mark.event);
    for (cudaEvent_t event : spare_events_) cudaEventDestroy(event);
  }

  std::unique_ptr<CopyCompletion> launch(Direction direction, std::span<const BlockPair> pairs,
                                         CopyBackend backend) override {
    cudaStream_t stream = streams_[static_cast<int>(direction)];
    cudaEvent_t event = nullptr;
    enqueue(direction, pairs, backend, stream);
    try {
      check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "creating a completion event");
      check_cuda(cudaEventRecord(event, stream), "recording a completion event");
    } catch (...) {
      if (event != nullptr) cudaEventDestroy(event);
      wait_out(stream);
      throw;
    }
    return std::make_unique<CudaCompletion>(event);
  }

  void enqueue(Direction direction, std::span<const BlockPair> pairs, CopyBackend backend, void* caller_stream) override {
    if (backend == CopyBackend::kAuto) backend = auto_backend(direction);
    const bool sm = backend == CopyBackend::kSmLoadStore || backend == CopyBackend::kSmBulk;
    if (backend == CopyBackend::kHost) throw Error("the CUDA copy engine has no host backend (use make_host_copy_engine)");
    check_copy_request(views_, pairs, direction, sm ? 16 : 1);
    check_cuda(cudaSetDevice(options_.device), cat("selecting GPU ", options_.device));
    cudaStream_t stream = stream_for(direction, caller_stream);
    try {
      if (!pairs.empty()) {
        switch (backend) {
          case CopyBackend::kDmaBatch: enqueue_dma(direction, pairs, stream, /*batched=*/true); break;
          case CopyBackend::kDmaPerBlock: enqueue_dma(direction, pairs, stream, /*batched=*/false); break;
          case CopyBackend::kSmLoadStore:
          case CopyBackend::kSmBulk: enqueue_sm(direction, pairs, stream, backend); break;
          default: throw Error(cat("unknown copy backend ", static_cast<int>(backend)));
        }
      }
    } catch (...) {
      wait_out(stream);
      throw;
    }
  }

  void when_done(Direction direction, void* caller_stream, CompletionCall fn, void* context) override {
    check_cuda(cudaSetDevice(options_.device), cat("selecting GPU ", options_.device));
    cudaStream_t stream = stream_for(direction, caller_stream);
    try {
      watcher_->add(stream, fn, context);
    } catch (...) {
      wait_out(stream);
      throw;
    }
  }

  cudaStream_t stream_for(Direction direction, void* caller_stream) const {
    return caller_stream != nullptr ? static_cast<cudaStream_t>(caller_stream) : streams_[static_cast<int>(direction)];
  }

  // Part of a copy may already be queued (a batch, a kernel slice, a pair list's upload) when a later
  // step fails: wait for it, so that when the caller sees the error nothing of it still writes.
  static void wait_out(cudaStream_t stream) {
    (void)cudaStreamSynchronize(stream);
    (void)cudaGetLastError();
  }

  // Marks are made, waited on and read from any thread (a session's launch() on one, its
  // take_finished() on another): their table and the spare events are under marks_mutex_, never
  // held across a wait for the GPU.
  uint64_t mark(Direction direction, void* caller_stream) override {
    const cudaStream_t stream = stream_for(direction, caller_stream);
    try {
      check_cuda(cudaSetDevice(options_.device), cat("selecting GPU ", options_.device));
      std::lock_guard lock(marks_mutex_);
      cudaEvent_t event = nullptr;
      if (!spare_events_.empty()) {
        event = spare_events_.back();
        spare_events_.pop_back();
      } else {
        check_cuda(cudaEventCreate(&event), "creating a timing event");
      }
      const cudaError_t recorded = cudaEventRecord(event, stream);
      if (recorded != cudaSuccess) {
        spare_events_.push_back(event);
        check_cuda(recorded, "recording a timing event");
      }
      marks_.emplace(++last_mark_, Mark{event, stream});
      clock_->keep_calibrating();  // timing is in use: rounds from now on (dma/gpu_clock.h)
      return last_mark_;
    } catch (...) {
      // A caller that gives up on its copies when a mark fails (a session reports the job failed)
      // must find nothing of them still running.
      wait_out(stream);
      throw;
    }
  }

  void when_reached(uint64_t mark, CompletionCall fn, void* context) override {
    const Mark found = find_mark(mark);
    check_cuda(cudaSetDevice(options_.device), cat("selecting GPU ", options_.device));
    try {
      watcher_->add_after(found.stream, found.event, fn, context);
    } catch (...) {
      wait_out(found.stream);
      throw;
    }
  }

  bool reached(uint64_t mark) override {
    const cudaError_t state = cudaEventQuery(find_mark(mark).event);
    if (state == cudaErrorNotReady) return false;
    check_cuda(state, "asking whether a copy's end mark was reached");
    return true;
  }

  MarkSpan span(uint64_t start, uint64_t end) override {
    const auto missing = [&] { return Error(cat("no timing marks ", start, " and ", end)); };
    cudaEvent_t last_event = nullptr;
    {
      std::lock_guard lock(marks_mutex_);
      auto first = marks_.find(start);
      auto last = marks_.find(end);
      if (first == marks_.end() || last == marks_.end()) throw missing();
      last_event = last->second.event;
    }
    // A completion call may run before the driver marks the events before it complete
    // (cudaEventElapsedTime then says cudaErrorNotReady): wait for the end mark, which has landed
    // or is about to, and with it for the start mark queued before it on the same stream.
    check_cuda(cudaEventSynchronize(last_event), "waiting for a copy's end mark");
    cudaEvent_t first_event = nullptr;
    {
      // Both marks are forgotten whatever the reading says (the caller cannot ask again): out of
      // the table now, so that the clock below, which may wait for its first origin, is asked
      // without the lock that mark() on the launch path takes.
      std::lock_guard lock(marks_mutex_);
      auto first = marks_.find(start);
      auto last = marks_.find(end);
      if (first == marks_.end() || last == marks_.end()) throw missing();  // read by another thread meanwhile
      first_event = first->second.event;
      marks_.erase(first);
      marks_.erase(last);
    }
    float elapsed_ms = 0;
    const cudaError_t elapsed = cudaEventElapsedTime(&elapsed_ms, first_event, last_event);
    GpuClock::Placed placed;
    std::exception_ptr place_failure;
    try {
      placed = clock_->place(last_event);
    } catch (...) {
      place_failure = std::current_exception();
    }
    {
      std::lock_guard lock(marks_mutex_);
      spare_events_.push_back(first_event);
      spare_events_.push_back(last_event);
    }
    check_cuda(elapsed, "reading a copy's GPU time");
    if (place_failure) std::rethrow_exception(place_failure);
    return {static_cast<int64_t>(elapsed_ms * 1e6), placed.ns, placed.window_ns};
  }

  void synchronize() override {
    for (cudaStream_t stream : streams_) check_cuda(cudaStreamSynchronize(stream), "synchronizing copy streams");
  }

  CopyBackend auto_backend(Direction direction) const override {
    uint64_t largest = 0;
    for (const SegmentView& view : views_) largest = std::max(largest, view.block_bytes);
    const uint64_t below = direction == Direction::kHostToDevice ? options_.auto_sm_below_h2d : options_.auto_sm_below_d2h;
    // SM kernels need 16-byte alignment; DMA takes anything.
    return aligned_ && largest < below ? options_.auto_sm_kernel : CopyBackend::kDmaBatch;
  }

  const std::vector<SegmentView>& views() const override { return views_; }

 private:
  void enqueue_dma(Direction direction, std::span<const BlockPair> pairs, cudaStream_t stream, bool batched) {
    std::vector<CopySpan> spans = plan_dma_spans(views_, pairs, direction, options_.host_split_base,
                                                 options_.host_split_bytes, /*merge=*/batched);
    const cudaMemcpyKind kind = direction == Direction::kHostToDevice ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    if (!batched) {
      for (const CopySpan& span : spans) {
        check_cuda(cudaMemcpyAsync(reinterpret_cast<void*>(span.dst), reinterpret_cast<const void*>(span.src), span.bytes,
                              kind, stream),
              cat("cudaMemcpyAsync of ", span.bytes, " bytes"));
      }
      return;
    }
    std::vector<void*> dsts;
    std::vector<const void*> srcs;
    std::vector<size_t> sizes;
    cudaMemcpyAttributes attributes{};
    attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    size_t attribute_index = 0;
    for (size_t first = 0; first < spans.size(); first += kBatchLimit) {
      const size_t count = std::min(kBatchLimit, spans.size() - first);
      dsts.resize(count);
      srcs.resize(count);
      sizes.resize(count);
      for (size_t i = 0; i < count; ++i) {
        dsts[i] = reinterpret_cast<void*>(spans[first + i].dst);
        srcs[i] = reinterpret_cast<const void*>(spans[first + i].src);
        sizes[i] = spans[first + i].bytes;
      }
      check_cuda(cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), count, &attributes, &attribute_index, 1,
                                 stream),
            cat("cudaMemcpyBatchAsync of ", count, " copies (a span crossing two pinned chunks is refused: ",
                "set host_split_base/bytes from the PinnedRegion)"));
    }
  }

  // SM launches of up to sm_carried_pairs_max pairs carry them in their kernels' parameters (at
  // most kInlinePairs per kernel); larger ones upload them first. An upload is a copy on the stream
  // that the kernel waits for, and with four rank processes on one H200 it can cost far more than
  // the copy itself: the copy engine row of `hugepin bench offload` moved 15.5-15.8 GB/s of 16 KiB
  // blocks in jobs of 128 pairs (a 2 KiB upload), 38-43 GB/s in jobs of 64 (1 KiB, and the views as
  // a second upload), 9.1-9.5 GB/s when those two went up as one, and 48.6 GB/s with 128 pairs
  // carried here. Small uploads are likely written into the stream's command buffer, larger ones
  // copied by a copy engine that the four processes' contexts take in turns (not verified). The
  // views are uploaded once, when the engine is made (docs/performance.md, "Copy launches that
  // never wait").
  void enqueue_sm(Direction direction, std::span<const BlockPair> pairs, cudaStream_t stream, CopyBackend backend) {
    const bool bulk = backend == CopyBackend::kSmBulk;
    // The kernels' contract (dma/cuda_copy_kernels.cuh): enqueue() refused unaligned views, and a
    // bulk piece is one stage.
    HUGEPIN_REQUIRE(aligned_, "views not 16-byte aligned");
    const ResidentViews& resident = resident_views_[views_index(direction, bulk)];
    UnitLayout layout = resident.layout;
    const auto* views = static_cast<const UnitView*>(resident.device);
    const unsigned blocks = std::max(1u, options_.sm_blocks);
    uint64_t pair_bytes = 0;
    for (const SegmentView& view : views_) pair_bytes += view.block_bytes;
    const uint64_t per_kernel = options_.sm_slice_bytes == 0
                                    ? pairs.size()
                                    : std::max<uint64_t>(1, options_.sm_slice_bytes / std::max<uint64_t>(pair_bytes, 1));
    const size_t shared = static_cast<size_t>(bulk_pipelines_) * detail::kBulkStages * bulk_stage_bytes_;
    const unsigned bulk_threads = 32 * bulk_pipelines_;
    if (pairs.size() <= std::max<uint64_t>(options_.sm_carried_pairs_max, kInlinePairs)) {
      const uint64_t count = pairs.size();  // not 0: enqueue() launches nothing for no pairs
      const uint64_t kernels = carried_kernels(count, per_kernel);
      InlinePairs carried{};
      for (uint64_t k = 0; k < kernels; ++k) {
        const uint64_t first = carried_share_first(count, kernels, k);
        layout.pair_count = carried_share_first(count, kernels, k + 1) - first;
        std::memcpy(carried.pairs, pairs.data() + first, layout.pair_count * sizeof(UnitPair));
        if (bulk) {
          detail::sm_bulk_inline_kernel<<<blocks, bulk_threads, shared, stream>>>(layout, views, carried,
                                                                                  bulk_stage_bytes_);
        } else {
          detail::sm_load_store_inline_kernel<<<blocks, 1024, 0, stream>>>(layout, views, carried);
        }
        check_cuda(cudaGetLastError(), cat("launching the ", backend_name(backend), " copy kernel"));
      }
      return;
    }
    PairSlots& slots = pair_slots_[static_cast<int>(direction)];
    const UnitPair* device_pairs = slots.reserve(pairs.size());
    // Pairs go up in batches that double in size, each followed by its kernels: the GPU starts
    // on the first batch while this thread stages the next, instead of waiting for the whole
    // list (262144 pairs, 4 MiB, for 1 GiB of 4 KiB blocks) to be staged and uploaded.
    uint64_t batch = kFirstUploadPairs;
    for (uint64_t first = 0; first < pairs.size(); first += batch, batch = std::min(2 * batch, kMaxUploadPairs)) {
      const uint64_t end = std::min<uint64_t>(pairs.size(), first + batch);
      slots.upload_pairs(pairs.subspan(first, end - first), first, stream);
      for (uint64_t kernel_first = first; kernel_first < end; kernel_first += per_kernel) {
        layout.pair_count = std::min<uint64_t>(per_kernel, end - kernel_first);
        if (bulk) {
          detail::sm_bulk_kernel<<<blocks, bulk_threads, shared, stream>>>(layout, views, device_pairs + kernel_first,
                                                                           bulk_stage_bytes_);
        } else {
          detail::sm_load_store_kernel<<<blocks, 1024, 0, stream>>>(layout, views, device_pairs + kernel_first);
        }
        check_cuda(cudaGetLastError(), cat("launching the ", backend_name(backend), " copy kernel"));
      }
    }
    slots.record_after(stream);
  }

  static size_t views_index(Direction direction, bool bulk) {
    return static_cast<size_t>(direction) * 2 + (bulk ? 1 : 0);
  }

  // Both directions' views for both kernels' piece sizes, to the device once (the engine's views
  // never change), on a stream of their own, waited for: any stream's kernels may read them.
  void upload_views() {
    for (Direction direction : {Direction::kHostToDevice, Direction::kDeviceToHost}) {
      for (bool bulk : {false, true}) {
        ResidentViews& resident = resident_views_[views_index(direction, bulk)];
        const uint64_t piece = bulk ? bulk_stage_bytes_ : kSmPieceBytes;
        const std::vector<UnitView> unit_views =
            plan_unit_views(views_, direction, piece, &resident.layout.pieces_per_pair);
        resident.layout.view_count = static_cast<uint32_t>(unit_views.size());
        resident.layout.piece_bytes = piece;
        const size_t bytes = unit_views.size() * sizeof(UnitView);  // views are never empty (make_cuda_copy_engine)
        check_cuda(cudaMalloc(&resident.device, bytes), "allocating copy views");
        check_cuda(cudaMemcpyAsync(resident.device, unit_views.data(), bytes, cudaMemcpyHostToDevice,
                                   upload_stream_),
                   "uploading copy views");
        check_cuda(cudaStreamSynchronize(upload_stream_), "uploading copy views");
      }
    }
  }

  std::vector<SegmentView> views_;
  CopyEngineOptions options_;
  bool aligned_;
  std::array<cudaStream_t, 2> streams_{};
  cudaStream_t upload_stream_ = nullptr;
  std::array<PairSlots, 2> pair_slots_{PairSlots(options_.sm_launches_queued), PairSlots(options_.sm_launches_queued)};
  std::array<ResidentViews, 4> resident_views_{};  // views_index(): direction x kernel
  uint32_t bulk_stage_bytes_ = 0;
  uint32_t bulk_pipelines_ = 0;
  std::shared_ptr<GpuClock> clock_;  // span()'s GPU ends on CLOCK_MONOTONIC; the device's, shared
  struct Mark {
    cudaEvent_t event;
    cudaStream_t stream;  // where it was recorded
  };
  Mark find_mark(uint64_t mark) {
    std::lock_guard lock(marks_mutex_);
    auto found = marks_.find(mark);
    if (found == marks_.end()) throw Error(cat("no timing mark ", mark));
    return found->second;
  }
  std::mutex marks_mutex_;  // marks_, spare_events_, last_mark_
  std::unordered_map<uint64_t, Mark> marks_;
  std::vector<cudaEvent_t> spare_events_;
  uint64_t last_mark_ = 0;
  std::optional<CompletionWatcher> watcher_;  // reset first in the destructor
};

}  // namespace

bool cuda_available() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) (void)cudaGetLastError();
  return error == cudaSuccess && count > 0;
}

std::unique_ptr<CopyEngine> make_cuda_copy_engine(std::vector<SegmentView> views, const CopyEngineOptions& options) {
  if (!cuda_available()) throw Error("no CUDA device is available (no driver, or no GPU visible to this process)");
  check_copy_request(views, {}, Direction::kHostToDevice, 1);
  return std::make_unique<CudaCopyEngine>(std::move(views), options);
}

}  // namespace hugepin
