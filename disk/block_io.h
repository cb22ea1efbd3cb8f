// Block I/O: reads and writes of lists of (file offset, memory span) on one file, completed
// asynchronously, with every failure named (file, offset, length, errno).
//
// Two implementations with one contract: io_uring (disk/uring_block_io.cc: O_DIRECT, the memory
// registered as fixed buffers, a bounded queue depth, completions reaped in batches) and a
// pread/pwrite thread pool (disk/thread_pool_block_io.cc), the fallback where io_uring is
// unavailable or the file system has no O_DIRECT. The spill layer (disk/spill.h) picks one.
//
// Both split each span into requests of at most `request_bytes`, keep requests in flight in
// parallel, and continue short reads and writes from where they stopped until the span is done
// or a request fails. A read that reaches the end of the file fails (a spill file always holds
// what is read from it).
//
// Thread-safety: submit() may be called from any thread. Completion callbacks run on the
// implementation's I/O thread (one at a time for io_uring, any pool thread for the pool) and
// must not block for long; they may call submit().
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/os.h"

namespace hugepin {

enum class BlockOp : uint8_t { kRead, kWrite };

// "read" / "write".
std::string_view block_op_name(BlockOp op);

// `bytes` bytes of memory at `data` and of the file at `offset`.
struct BlockSpan {
  uint64_t offset = 0;
  std::byte* data = nullptr;
  uint64_t bytes = 0;
};

// Why one span failed: the first of its requests that failed.
struct BlockFailure {
  size_t span = 0;           // index in the submitted list
  uint64_t offset = 0;       // file offset of the failed request
  uint64_t bytes = 0;        // its length
  int errno_value = 0;       // 0 when no errno applies (end of file)
  std::string message;       // "cannot write FILE at offset O (L bytes): ENOSPC ..."
};

struct BlockResult {
  BlockOp op = BlockOp::kRead;
  size_t spans = 0;
  uint64_t bytes = 0;                 // bytes moved by the spans that succeeded
  std::vector<BlockFailure> failures; // one per failed span, by span index; empty: all done
  bool ok() const { return failures.empty(); }
};

// Called once per submitted list, when every span has finished (succeeded or failed).
using BlockDone = std::function<void(BlockResult)>;

// The file a BlockIo works on. The descriptor is borrowed: the caller keeps it open for the
// BlockIo's life.
struct BlockFile {
  int fd = -1;
  std::string path;        // for messages
  bool direct = false;      // opened with O_DIRECT
  uint64_t alignment = 1;  // offsets, lengths and addresses must be multiples (O_DIRECT); 1: none
};

class BlockIo {
 public:
  virtual ~BlockIo() = default;

  // Queues every span of `spans` for `op` and returns at once; `done` runs when all have
  // finished (on the caller's thread, before submit returns, when `spans` is empty).
  // REQUIRES: the memory and file ranges stay valid and untouched by others until `done` (a
  // lifetime: not checked).
  // Throws Error, queueing nothing, when a span is empty, misaligned for the file, or its
  // offset + bytes overflows — naming the span and the value.
  virtual void submit(BlockOp op, std::vector<BlockSpan> spans, BlockDone done) = 0;

  // What this is, for logs and benchmark rows: "io_uring (queue depth 32, fixed buffers)".
  virtual std::string describe() const = 0;
};

// Submits and waits: the result of one list. Thread-safe as submit() is.
BlockResult run_blocking(BlockIo& io, BlockOp op, std::vector<BlockSpan> spans);

// Throws Error carrying the first failure's message and errno, and how many spans failed.
void throw_if_failed(const BlockResult& result);

struct UringOptions {
  unsigned queue_depth = 32;   // requests in flight at once
  unsigned submit_batch = 8;   // requests prepared per io_uring_submit while filling the queue
  uint64_t request_bytes = 2 << 20;  // largest request; at most 1 GiB
  // Memory to register as fixed buffers (in pieces of at most 1 GiB, the kernel's limit per
  // buffer); spans inside it use READ_FIXED/WRITE_FIXED. Empty: no fixed buffers.
  std::span<std::byte> fixed_memory;
  // When registering fails (RLIMIT_MEMLOCK, memory the kernel will not pin): true throws, false
  // warns once and continues with plain READ/WRITE.
  bool require_fixed = false;
};

// An io_uring BlockIo on `file`, driven by its own thread (which owns the ring: it creates,
// registers and submits, so the ring can be single-issuer). Throws Error when io_uring cannot be
// set up, with the errno of io_uring_queue_init (ENOSYS: no io_uring; EPERM: disabled by sysctl
// kernel.io_uring_disabled or a seccomp filter), or of registering with require_fixed.
// Destruction waits for everything submitted to finish.
std::unique_ptr<BlockIo> make_uring_block_io(const BlockFile& file, const UringOptions& options);

struct ThreadPoolOptions {
  unsigned threads = 8;
  uint64_t request_bytes = 2 << 20;
};

// A pread/pwrite BlockIo on `file` with `options.threads` threads, through `os` (tests inject
// short transfers and errors there). Destruction waits for everything submitted to finish.
std::unique_ptr<BlockIo> make_thread_pool_block_io(Os& os, const BlockFile& file, const ThreadPoolOptions& options);

}  // namespace hugepin
