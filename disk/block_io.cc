#include "disk/block_io.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "base/contract.h"
#include "base/error.h"
#include "base/size.h"
#include "disk/detail/block_batch.h"

namespace hugepin {

std::string_view block_op_name(BlockOp op) { return op == BlockOp::kRead ? "read" : "write"; }

BlockResult run_blocking(BlockIo& io, BlockOp op, std::vector<BlockSpan> spans) {
  std::mutex mutex;
  std::condition_variable finished;
  std::optional<BlockResult> outcome;
  io.submit(op, std::move(spans), [&](BlockResult result) {
    std::lock_guard lock(mutex);
    outcome = std::move(result);
    finished.notify_one();
  });
  std::unique_lock lock(mutex);
  finished.wait(lock, [&] { return outcome.has_value(); });
  return std::move(*outcome);
}

void throw_if_failed(const BlockResult& result) {
  if (result.ok()) return;
  const BlockFailure& first = result.failures.front();
  std::string more = result.failures.size() > 1 ? cat(" (and ", result.failures.size() - 1, " more of ", result.spans,
                                                       " spans failed)")
                                                : "";
  throw Error(first.message + more, first.errno_value);
}

namespace detail {

std::vector<BlockRequest> split_requests(const std::vector<BlockSpan>& spans, uint64_t request_bytes,
                                         RequestFence fence) {
  std::vector<BlockRequest> requests;
  for (size_t i = 0; i < spans.size(); ++i) {
    const BlockSpan& span = spans[i];
    for (uint64_t done = 0; done < span.bytes;) {
      std::byte* data = span.data + done;
      uint64_t bytes = std::min(request_bytes, span.bytes - done);
      if (fence.size != 0 && data >= fence.base) {
        uint64_t into = static_cast<uint64_t>(data - fence.base) % fence.size;
        bytes = std::min(bytes, fence.size - into);
      }
      requests.push_back({i, span.offset + done, data, bytes});
      done += bytes;
    }
  }
  return requests;
}

void check_spans(const std::vector<BlockSpan>& spans, const BlockFile& file) {
  const uint64_t alignment = std::max<uint64_t>(file.alignment, 1);
  for (size_t i = 0; i < spans.size(); ++i) {
    const BlockSpan& span = spans[i];
    auto refuse = [&](std::string_view why) {
      throw Error(cat("cannot queue span ", i, " (offset ", span.offset, ", ", span.bytes, " bytes at ",
                      static_cast<const void*>(span.data), ") for ", file.path, ": ", why));
    };
    if (span.bytes == 0 || span.data == nullptr) refuse("it is empty");
    if (span.offset + span.bytes < span.offset) refuse("its end overflows 64 bits");
    if (span.offset % alignment != 0 || span.bytes % alignment != 0 ||
        reinterpret_cast<uintptr_t>(span.data) % alignment != 0) {
      refuse(cat("direct I/O needs offset, length and address aligned to ", alignment, " bytes"));
    }
  }
}

std::string block_error_message(BlockOp op, const std::string& path, uint64_t offset, uint64_t bytes,
                                 int errno_value) {
  std::string where = cat("cannot ", block_op_name(op), " ", path, " at offset ", offset, " (", bytes, " bytes): ");
  if (errno_value != 0) return where + errno_text(errno_value);
  return where + (op == BlockOp::kRead ? "the file ends before it" : "the write made no progress");
}

uint64_t usable_request_bytes(uint64_t request_bytes, uint64_t alignment) {
  alignment = std::max<uint64_t>(alignment, 1);
  uint64_t bytes = std::clamp<uint64_t>(request_bytes, alignment, kGiB);
  return std::max(alignment, bytes / alignment * alignment);
}

BlockBatch::BlockBatch(BlockOp op, std::vector<BlockSpan> spans, BlockDone done, uint64_t request_bytes,
                       RequestFence fence)
    : op_(op), spans_(std::move(spans)), done_(std::move(done)) {
  requests_ = split_requests(spans_, request_bytes, fence);
  outstanding_ = requests_.size();
  span_failed_.assign(spans_.size(), false);
}

bool BlockBatch::next(BlockRequest* out) {
  if (handed_out_ == requests_.size()) return false;
  *out = requests_[handed_out_++];
  return true;
}

bool BlockBatch::finish(const BlockRequest&) { return --outstanding_ == 0; }

bool BlockBatch::fail(const BlockRequest& request, uint64_t offset, uint64_t bytes, int errno_value,
                      std::string message) {
  if (!span_failed_[request.span]) {
    span_failed_[request.span] = true;
    failures_.push_back({request.span, offset, bytes, errno_value, std::move(message)});
  }
  return --outstanding_ == 0;
}

void BlockBatch::complete() {
  HUGEPIN_REQUIRE(outstanding_ == 0, outstanding_, " requests outstanding");
  BlockResult result;
  result.op = op_;
  result.spans = spans_.size();
  for (size_t i = 0; i < spans_.size(); ++i) {
    if (!span_failed_[i]) result.bytes += spans_[i].bytes;
  }
  std::sort(failures_.begin(), failures_.end(),
            [](const BlockFailure& a, const BlockFailure& b) { return a.span < b.span; });
  result.failures = std::move(failures_);
  if (done_) done_(std::move(result));
}

}  // namespace detail
}  // namespace hugepin
