// The host engine: memcpy on CPU threads, for machines without a GPU.
#include <cstring>
#include <thread>

#include "base/error.h"
#include "dma/copy_engine.h"
#include "dma/copy_plan.h"

namespace hugepin {
namespace {

class DoneCompletion final : public CopyCompletion {
 public:
  bool done() override { return true; }
  void wait() override {}
};

class HostCopyEngine final : public CopyEngine {
 public:
  HostCopyEngine(std::vector<SegmentView> views, const CopyEngineOptions& options)
      : views_(std::move(views)), threads_(std::max(1u, options.host_threads)) {}

  std::unique_ptr<CopyCompletion> launch(Direction direction, std::span<const BlockPair> pairs,
                                         CopyBackend backend) override {
    if (backend != CopyBackend::kAuto && backend != CopyBackend::kHost) {
      throw Error(cat("the host copy engine has no ", backend_name(backend), " backend"));
    }
    check_copy_request(views_, pairs, direction, 1);
    std::vector<CopySpan> spans = plan_dma_spans(views_, pairs, direction);
    auto copy_range = [&spans](size_t first, size_t last) {
      for (size_t i = first; i < last; ++i) {
        std::memcpy(reinterpret_cast<void*>(spans[i].dst), reinterpret_cast<const void*>(spans[i].src), spans[i].bytes);
      }
    };
    if (threads_ == 1 || spans.size() < 2) {
      copy_range(0, spans.size());
    } else {
      std::vector<std::thread> workers;
      for (unsigned t = 0; t < threads_; ++t) {
        workers.emplace_back(copy_range, spans.size() * t / threads_, spans.size() * (t + 1) / threads_);
      }
      for (std::thread& worker : workers) worker.join();
    }
    return std::make_unique<DoneCompletion>();
  }

  void synchronize() override {}
  CopyBackend auto_backend(Direction) const override { return CopyBackend::kHost; }
  const std::vector<SegmentView>& views() const override { return views_; }

 private:
  std::vector<SegmentView> views_;
  unsigned threads_;
};

}  // namespace

std::string_view backend_name(CopyBackend backend) {
  switch (backend) {
    case CopyBackend::kAuto: return "auto";
    case CopyBackend::kDmaBatch: return "dma-batch";
    case CopyBackend::kDmaPerBlock: return "dma-per-block";
    case CopyBackend::kSmLoadStore: return "sm";
    case CopyBackend::kSmBulk: return "sm-bulk";
    case CopyBackend::kHost: return "host";
  }
  return "?";
}

CopyBackend parse_backend(std::string_view text) {
  for (CopyBackend backend : {CopyBackend::kAuto, CopyBackend::kDmaBatch, CopyBackend::kDmaPerBlock,
                              CopyBackend::kSmLoadStore, CopyBackend::kSmBulk, CopyBackend::kHost}) {
    if (backend_name(backend) == text) return backend;
  }
  throw Error(cat("unknown copy backend '", text, "' (auto, dma-batch, dma-per-block, sm, sm-bulk, host)"));
}

std::unique_ptr<CopyEngine> make_host_copy_engine(std::vector<SegmentView> views, const CopyEngineOptions& options) {
  check_copy_request(views, {}, Direction::kHostToDevice, 1);
  return std::make_unique<HostCopyEngine>(std::move(views), options);
}

}  // namespace hugepin
