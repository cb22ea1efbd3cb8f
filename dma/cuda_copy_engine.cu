// The CUDA copy engine: batched DMA, per-block DMA (a baseline), and the SM kernels, on two
// low-priority streams, one per direction.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <unordered_map>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>

#include "base/contract.h"
#include "base/error.h"
#include "base/os.h"
#include "dma/copy_engine.h"
#include "dma/completion_watcher.h"
#include "dma/copy_plan.h"
#include "dma/cuda_check.h"
#include "dma/cuda_copy_kernels.cuh"

namespace hugepin {
namespace {

constexpr uint64_t kSmPieceBytes = 64 * 1024;  // a warp's unit of a large block (32-bit indices in the kernel)
constexpr uint32_t kBulkMaxStageBytes = 32 * 1024;
constexpr uint32_t kBulkSharedBudget = 192 * 1024;
constexpr size_t kBatchLimit = 8192;  // copies per cudaMemcpyBatchAsync call
// SM kernels: pairs uploaded before the first kernel of a launch, and the most in one upload.
constexpr uint64_t kFirstUploadPairs = 4096;
constexpr uint64_t kMaxUploadPairs = 65536;

class CudaCompletion final : public CopyCompletion {
 public:
  explicit CudaCompletion(cudaEvent_t event) : event_(event) {}
  ~CudaCompletion() override { cudaEventDestroy(event_); }
  CudaCompletion(const CudaCompletion&) = delete;
  CudaCompletion& operator=(const CudaCompletion&) = delete;

  bool done() override {
    cudaError_t state = cudaEventQuery(event_);
    if (state == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    check_cuda(state, "copy failed");
    return true;
  }
  void wait() override { check_cuda(cudaEventSynchronize(event_), "copy failed"); }

 private:
  cudaEvent_t event_;
};

// Per-launch metadata (views and pairs) for the SM kernels: staged in pinned host memory and
// copied to the device on the launch's stream. A slot is reused only after the event recorded
// behind its kernel has fired.
class MetadataSlots {
 public:
  MetadataSlots() = default;
  ~MetadataSlots() {
    for (Slot& slot : slots_) {
      if (slot.event != nullptr) {
        cudaEventSynchronize(slot.event);
        cudaEventDestroy(slot.event);
      }
      cudaFreeHost(slot.host);
      cudaFree(slot.device);
    }
  }
  MetadataSlots(const MetadataSlots&) = delete;
  MetadataSlots& operator=(const MetadataSlots&) = delete;

  // Takes the next slot (waiting until its last kernel is done), sized for `views` and
  // `pair_count` pairs, and uploads the views on `stream`. Pairs follow with upload_pairs(); the
  // slot is released by record_after(stream) once the kernels that read them are enqueued.
  std::pair<const UnitView*, const UnitPair*> reserve(const std::vector<UnitView>& views, size_t pair_count,
                                                      cudaStream_t stream) {
    Slot& slot = slots_[next_];
    current_ = next_;
    next_ = (next_ + 1) % slots_.size();
    if (slot.event != nullptr) check_cuda(cudaEventSynchronize(slot.event), "waiting for a metadata slot");
    view_bytes_ = views.size() * sizeof(UnitView);
    const size_t bytes = view_bytes_ + pair_count * sizeof(UnitPair);
    if (bytes > slot.capacity) {
      const size_t capacity = std::max<size_t>(bytes, slot.capacity * 2);
      cudaFreeHost(slot.host);
      cudaFree(slot.device);
      slot.host = nullptr;
      slot.device = nullptr;
      slot.capacity = 0;  // until both allocations below succeed: a failed one must not be reused
      check_cuda(cudaMallocHost(&slot.host, capacity), "allocating copy metadata (host)");
      check_cuda(cudaMalloc(&slot.device, capacity), "allocating copy metadata (device)");
      slot.capacity = capacity;
    }
    std::memcpy(slot.host, views.data(), view_bytes_);
    check_cuda(cudaMemcpyAsync(slot.device, slot.host, view_bytes_, cudaMemcpyHostToDevice, stream),
               "uploading copy metadata");
    auto* base = static_cast<char*>(slot.device);
    return {reinterpret_cast<const UnitView*>(base), reinterpret_cast<const UnitPair*>(base + view_bytes_)};
  }

  // Stages `pairs` as pairs [first, first + pairs.size()) of the reserved slot and uploads them on
  // `stream`.
  void upload_pairs(std::span<const BlockPair> pairs, size_t first, cudaStream_t stream) {
    Slot& slot = slots_[current_];
    static_assert(sizeof(UnitPair) == sizeof(BlockPair));
    const size_t offset = view_bytes_ + first * sizeof(UnitPair);
    std::memcpy(static_cast<char*>(slot.host) + offset, pairs.data(), pairs.size_bytes());
    check_cuda(cudaMemcpyAsync(static_cast<char*>(slot.device) + offset, static_cast<char*>(slot.host) + offset,
                               pairs.size_bytes(), cudaMemcpyHostToDevice, stream),
               "uploading copy metadata");
  }

  void record_after(cudaStream_t stream) {
    Slot& slot = slots_[current_];
    if (slot.event == nullptr) check_cuda(cudaEventCreateWithFlags(&slot.event, cudaEventDisableTiming), "creating an event");
    check_cuda(cudaEventRecord(slot.event, stream), "recording a metadata event");
  }

 private:
  struct Slot {
    void* host = nullptr;
    void* device = nullptr;
    size_t capacity = 0;
    cudaEvent_t event = nullptr;
  };
  std::array<Slot, 4> slots_{};
  size_t next_ = 0;
  size_t current_ = 0;
  size_t view_bytes_ = 0;  // of the slot reserved last
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
    check_cuda(cudaFuncSetAttribute(detail::sm_bulk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(bulk_pipelines_ * detail::kBulkStages * bulk_stage_bytes_)),
          "sizing the bulk copy kernel's shared memory");
    check_cuda(cudaStreamCreateWithPriority(&calibration_stream_, cudaStreamNonBlocking, greatest),
               "creating a calibration stream");
    check_cuda(cudaEventCreate(&origin_event_), "creating a timing event");
    calibrate();
    watcher_.emplace(options_.device, options_.completion_poll_ns);
  }

  ~CudaCopyEngine() override {
    // Members go after this body: the completion calls must run while the streams still exist.
    watcher_.reset();
    for (cudaStream_t stream : streams_) {
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    }
    cudaStreamDestroy(calibration_stream_);
    for (auto& [id, event] : marks_) spare_events_.push_back(event);
    for (cudaEvent_t event : spare_events_) cudaEventDestroy(event);
    if (origin_event_ != nullptr) cudaEventDestroy(origin_event_);
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

  // Part of a copy may already be queued (a batch, a kernel slice, a metadata upload) when a later
  // step fails: wait for it, so that when the caller sees the error nothing of it still writes.
  static void wait_out(cudaStream_t stream) {
    (void)cudaStreamSynchronize(stream);
    (void)cudaGetLastError();
  }

  uint64_t mark(Direction direction, void* caller_stream) override {
    cudaEvent_t event = nullptr;
    if (!spare_events_.empty()) {
      event = spare_events_.back();
      spare_events_.pop_back();
    } else {
      check_cuda(cudaEventCreate(&event), "creating a timing event");
    }
    const cudaError_t recorded = cudaEventRecord(event, stream_for(direction, caller_stream));
    if (recorded != cudaSuccess) {
      spare_events_.push_back(event);
      check_cuda(recorded, "recording a timing event");
    }
    marks_.emplace(++last_mark_, event);
    return last_mark_;
  }

  MarkSpan span(uint64_t start, uint64_t end) override {
    auto first = marks_.find(start);
    auto last = marks_.find(end);
    if (first == marks_.end() || last == marks_.end()) throw Error(cat("no timing marks ", start, " and ", end));
    float elapsed_ms = 0;
    float since_origin_ms = 0;
    // A completion call may run before the driver marks the events before it complete
    // (cudaEventElapsedTime then says cudaErrorNotReady): wait for the end mark, which has landed
    // or is about to, and with it for the start mark queued before it on the same stream.
    check_cuda(cudaEventSynchronize(last->second), "waiting for a copy's end mark");
    if (real_os().monotonic_ns() - origin_ns_ > kCalibrationAgeNs) calibrate();
    check_cuda(cudaEventElapsedTime(&elapsed_ms, first->second, last->second), "reading a copy's GPU time");
    check_cuda(cudaEventElapsedTime(&since_origin_ms, origin_event_, last->second), "reading a copy's GPU time");
    const MarkSpan result{static_cast<int64_t>(elapsed_ms * 1e6), origin_ns_ + static_cast<int64_t>(since_origin_ms * 1e6)};
    spare_events_.push_back(first->second);
    spare_events_.push_back(last->second);
    marks_.erase(first);
    marks_.erase(last);
    return result;
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

  void enqueue_sm(Direction direction, std::span<const BlockPair> pairs, cudaStream_t stream, CopyBackend backend) {
    const bool bulk = backend == CopyBackend::kSmBulk;
    const uint64_t piece = bulk ? bulk_stage_bytes_ : kSmPieceBytes;
    // The kernels' contract (dma/cuda_copy_kernels.cuh): enqueue() refused unaligned views, and a
    // bulk piece is one stage.
    HUGEPIN_REQUIRE(aligned_, "views not 16-byte aligned");
    UnitLayout layout{};
    std::vector<UnitView> unit_views = plan_unit_views(views_, direction, piece, &layout.pieces_per_pair);
    layout.view_count = static_cast<uint32_t>(unit_views.size());
    layout.piece_bytes = piece;
    layout.pair_count = pairs.size();
    MetadataSlots& slots = metadata_[static_cast<int>(direction)];
    auto [views, device_pairs] = slots.reserve(unit_views, pairs.size(), stream);
    const unsigned blocks = std::max(1u, options_.sm_blocks);
    uint64_t pair_bytes = 0;
    for (const SegmentView& view : views_) pair_bytes += view.block_bytes;
    const uint64_t per_kernel = options_.sm_slice_bytes == 0
                                    ? pairs.size()
                                    : std::max<uint64_t>(1, options_.sm_slice_bytes / std::max<uint64_t>(pair_bytes, 1));
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
          const size_t shared = static_cast<size_t>(bulk_pipelines_) * detail::kBulkStages * bulk_stage_bytes_;
          detail::sm_bulk_kernel<<<blocks, 32 * bulk_pipelines_, shared, stream>>>(
              layout, views, device_pairs + kernel_first, bulk_stage_bytes_);
        } else {
          detail::sm_load_store_kernel<<<blocks, 1024, 0, stream>>>(layout, views, device_pairs + kernel_first);
        }
        check_cuda(cudaGetLastError(), cat("launching the ", backend_name(backend), " copy kernel"));
      }
    }
    slots.record_after(stream);
  }

  // The GPU clock's origin on CLOCK_MONOTONIC, for span(): an event reached now, on a stream of
  // its own that nothing else waits on, so that it is reached at once even while copies run.
  void calibrate() {
    check_cuda(cudaEventRecord(origin_event_, calibration_stream_), "recording a timing event");
    cudaError_t state;
    while ((state = cudaEventQuery(origin_event_)) == cudaErrorNotReady) {
      // Spinning notices the event within a microsecond or two; a blocking wait is later.
    }
    check_cuda(state, "calibrating the GPU clock");
    origin_ns_ = real_os().monotonic_ns();
  }

  // How old the calibration may get before span() makes a new one. The event clock and
  // CLOCK_MONOTONIC do not stay together: on the H200 host, with one calibration per engine,
  // GPU end times tens of seconds later came out up to tens of microseconds after the host had
  // heard of them (negative landing delays in `hugepin bench offload`). A calibration is a few
  // microseconds of spinning; span() is called per job.
  static constexpr int64_t kCalibrationAgeNs = 100'000'000;

  std::vector<SegmentView> views_;
  CopyEngineOptions options_;
  bool aligned_;
  std::array<cudaStream_t, 2> streams_{};
  cudaStream_t calibration_stream_ = nullptr;
  std::array<MetadataSlots, 2> metadata_;
  uint32_t bulk_stage_bytes_ = 0;
  uint32_t bulk_pipelines_ = 0;
  cudaEvent_t origin_event_ = nullptr;
  int64_t origin_ns_ = 0;
  std::unordered_map<uint64_t, cudaEvent_t> marks_;
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
