// Internal to the BlockIo implementations: a submitted list on its way, split into requests,
// collecting their outcomes; and the checks and messages both implementations share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "disk/block_io.h"

namespace hugepin::detail {

// One system call's worth of a span (one SQE, one pread/pwrite).
struct BlockRequest {
  size_t span = 0;
  uint64_t offset = 0;
  std::byte* data = nullptr;
  uint64_t bytes = 0;
};

// Where requests must not cross: multiples of `size` from `base` (the edges of registered
// buffers). size 0: nowhere.
struct RequestFence {
  const std::byte* base = nullptr;
  uint64_t size = 0;
};

// Splits spans into requests of at most `request_bytes`, cut at the fence, in span order.
std::vector<BlockRequest> split_requests(const std::vector<BlockSpan>& spans, uint64_t request_bytes,
                                         RequestFence fence = {});

// Throws Error naming the span when one is empty, misaligned for `file`, or overflows.
void check_spans(const std::vector<BlockSpan>& spans, const BlockFile& file);

// "cannot write FILE at offset O (L bytes): <errno text>"; errno 0 on a read: the file ended.
std::string block_error_message(BlockOp op, const std::string& path, uint64_t offset, uint64_t bytes, int errno_value);

// `request_bytes` made usable: at least the alignment, a multiple of it, at most 1 GiB.
uint64_t usable_request_bytes(uint64_t request_bytes, uint64_t alignment);

// A submitted list: its requests, which of them are handed out, and what happened to them.
// Not thread-safe: each implementation serializes access (one driver thread, or a mutex).
class BlockBatch {
 public:
  BlockBatch(BlockOp op, std::vector<BlockSpan> spans, BlockDone done, uint64_t request_bytes, RequestFence fence);

  BlockOp op() const { return op_; }
  // The next request not handed out yet; false when every request was handed out.
  bool next(BlockRequest* out);
  // Records the end of a request handed out by next(): success, or the failure of its span at
  // [offset, offset + bytes) (the first failure of a span is kept). Returns true when it was the
  // last outstanding request.
  bool finish(const BlockRequest& request);
  bool fail(const BlockRequest& request, uint64_t offset, uint64_t bytes, int errno_value, std::string message);
  // Calls the completion callback with the result. REQUIRES: finish() returned true.
  void complete();

 private:
  BlockOp op_;
  std::vector<BlockSpan> spans_;
  BlockDone done_;
  std::vector<BlockRequest> requests_;
  size_t handed_out_ = 0;
  size_t outstanding_ = 0;
  std::vector<BlockFailure> failures_;
  std::vector<bool> span_failed_;
};

}  // namespace hugepin::detail
