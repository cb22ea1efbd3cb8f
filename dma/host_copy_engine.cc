// The host engine: memcpy on CPU threads, for machines without a GPU.
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "base/error.h"
#include "base/os.h"
#include "base/parallel.h"
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
    enqueue(direction, pairs, backend, nullptr);
    return std::make_unique<DoneCompletion>();
  }

  void enqueue(Direction direction, std::span<const BlockPair> pairs, CopyBackend backend, void*) override {
    if (backend != CopyBackend::kAuto && backend != CopyBackend::kHost) {
      throw Error(cat("the host copy engine has no ", backend_name(backend), " backend"));
    }
    check_copy_request(views_, pairs, direction, 1);
    std::vector<CopySpan> spans = plan_dma_spans(views_, pairs, direction);
    auto copy_range = [&spans](Share share) {
      for (uint64_t i = share.first; i < share.last; ++i) {
        std::memcpy(reinterpret_cast<void*>(spans[i].dst), reinterpret_cast<const void*>(spans[i].src), spans[i].bytes);
      }
    };
    if (threads_ == 1 || spans.size() < 2) {
      copy_range({0, spans.size()});
    } else {
      run_on_threads(threads_, [&](unsigned t) { copy_range(share_of(spans.size(), t, threads_)); });
    }
  }

  void when_done(Direction, void*, CompletionCall fn, void* context) override { fn(context, 0); }

  uint64_t mark(Direction, void*) override {
    std::lock_guard lock(marks_mutex_);
    marks_.emplace(++last_mark_, real_os().monotonic_ns());
    return last_mark_;
  }

  // The host engine's copies are done before enqueue() returns: every mark is reached.
  void when_reached(uint64_t mark, CompletionCall fn, void* context) override {
    (void)reached(mark);
    fn(context, 0);
  }

  bool reached(uint64_t mark) override {
    std::lock_guard lock(marks_mutex_);
    if (marks_.count(mark) == 0) throw Error(cat("no timing mark ", mark));
    return true;
  }

  MarkSpan span(uint64_t start, uint64_t end) override {
    std::lock_guard lock(marks_mutex_);
    auto first = marks_.find(start);
    auto last = marks_.find(end);
    if (first == marks_.end() || last == marks_.end()) throw Error(cat("no timing marks ", start, " and ", end));
    const MarkSpan result{last->second - first->second, last->second, 0};
    marks_.erase(first);
    marks_.erase(last);
    return result;
  }

  void synchronize() override {}
  CopyBackend auto_backend(Direction) const override { return CopyBackend::kHost; }
  const std::vector<SegmentView>& views() const override { return views_; }

 private:
  std::vector<SegmentView> views_;
  unsigned threads_;
  std::mutex marks_mutex_;
  std::unordered_map<uint64_t, int64_t> marks_;
  uint64_t last_mark_ = 0;
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
