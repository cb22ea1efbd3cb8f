// Spill and restore: chunks of one rank region moved to one file and back — the disk tier
// under the host tier. Chunk i of the region (chunk_bytes at offset i * chunk_bytes; the last
// chunk may be shorter) lives at offset i * chunk_bytes of the file.
//
// The file is opened with O_DIRECT and moved through io_uring with the region registered as fixed
// buffers. Where io_uring is unavailable (io_uring_setup refused: kernel.io_uring_disabled, a
// seccomp filter, no io_uring) or the file system has no O_DIRECT (open answers EINVAL), a
// pread/pwrite thread pool does the work instead, and a warning says so once per process.
// HUGEPIN_SPILL_IO=auto|uring|threads (or SpillOptions::io) forces a path: `uring` makes a missing
// io_uring or O_DIRECT an error; `threads` skips io_uring.
//
// Jobs are asynchronous: spill() and restore() queue a list of chunks and return a completion.
// For the scheduler: pin (hold) every chunk of a job before calling spill()/restore(), and
// release the holds in the job's callback, which runs once every chunk of the job is finished
// (successfully or not) and before wait() returns. While a job is in flight its chunks' memory
// belongs to the I/O: a spilled chunk must not be overwritten, a restored chunk must not be read.
//
// Thread-safety: spill(), restore() and sync() may be called from any thread. Jobs start in
// submission order and run concurrently up to the queue depth; two jobs in flight at once must
// not name the same chunk (the holds above guarantee it).
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/os.h"
#include "base/unique_fd.h"
#include "disk/block_io.h"

namespace hugepin {

enum class SpillIo : uint8_t {
  kAuto,     // io_uring + O_DIRECT where possible, else the thread pool (HUGEPIN_SPILL_IO may force)
  kUring,    // io_uring + O_DIRECT or an error
  kThreads,  // the pread/pwrite thread pool (O_DIRECT where the file system has it)
};

// "auto", "uring", "threads".
std::string_view spill_io_name(SpillIo io);
std::optional<SpillIo> parse_spill_io(std::string_view text);
// `requested`, unless it is kAuto and HUGEPIN_SPILL_IO names another (a bad value is warned
// about once and ignored).
SpillIo effective_spill_io(SpillIo requested);

enum class SpillOpen : uint8_t {
  kCreate,    // read-write; created when absent, sized to the region (allocated on disk)
  kExisting,  // read-only, for restore only; must exist and hold exactly the region's bytes
};

struct SpillOptions {
  uint64_t chunk_bytes = 2 << 20;
  SpillIo io = SpillIo::kAuto;
  SpillOpen open = SpillOpen::kCreate;
  mode_t mode = 0600;  // of a created file
  // io_uring: requests in flight, requests per submit, largest request; thread-pool threads.
  // Measured with `hugepin bench spill --methods uring,device --qd Q --request R --batch B`
  // (docs/performance.md): 32 requests of 2 MiB in flight reach the device's sequential figure
  // on the development VM; fewer or smaller requests fall short; the batch made no measurable
  // difference from 1 to 32; 8 pool threads did better than 4 and 16.
  unsigned queue_depth = 32;
  unsigned submit_batch = 8;
  uint64_t request_bytes = 2 << 20;
  unsigned threads = 8;  // thread pool
};

// What a SpillFile got.
struct SpillBackend {
  bool uring = false;
  bool direct = false;       // O_DIRECT
  uint64_t alignment = 1;    // what O_DIRECT requires of offsets, lengths and addresses
  std::string description;   // the BlockIo's own: "io_uring, queue depth 32, ..., fixed buffers"
  std::string fallback;      // why it is not io_uring + O_DIRECT; "" when it is, or when forced
};

enum class SpillOp : uint8_t { kSpill, kRestore };

struct ChunkFailure {
  uint64_t chunk = 0;
  int errno_value = 0;
  std::string message;  // names the file, offset, length and errno
};

struct SpillResult {
  SpillOp op = SpillOp::kSpill;
  std::vector<uint64_t> chunks;  // as submitted
  uint64_t bytes = 0;            // moved by the chunks that succeeded
  std::vector<ChunkFailure> failures;
  bool ok() const { return failures.empty(); }
  // Throws Error with the first failure's message (and how many chunks failed).
  void throw_if_failed() const;
};

// Runs once per job on an I/O thread, before the job's waiters wake. Must not throw or block for
// long; may submit more jobs.
using SpillCallback = std::function<void(const SpillResult&)>;

// A handle on one job; copies share it. Thread-safe.
class SpillCompletion {
 public:
  bool ready() const;
  // Blocks until the job is finished. The result lives as long as any copy of this handle; a
  // temporary handle (file.spill(...).wait()) gives a copy instead.
  const SpillResult& wait() const&;
  SpillResult wait() const&&;

 private:
  friend class SpillFile;
  struct State {
    std::mutex mutex;
    std::condition_variable finished;
    bool done = false;
    SpillResult result;
  };
  explicit SpillCompletion(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

// One region and its spill file. Owns the descriptor and the I/O engine (a ring and its thread,
// or a thread pool): move-only. Destruction waits for every job in flight.
class SpillFile {
 public:
  // Opens `path` for `region` (page aligned; the memory must stay mapped while this lives).
  // Throws Error naming the path and value when the file cannot be opened, created, sized or
  // allocated (ENOSPC), has the wrong size (kExisting), the chunk size or region is not a
  // multiple of the direct I/O alignment, or `io` is kUring and io_uring or O_DIRECT is missing.
  static SpillFile open(Os& os, const std::string& path, std::span<std::byte> region, const SpillOptions& options);

  SpillFile() = default;
  SpillFile(SpillFile&&) noexcept = default;
  // Drains this file's jobs before it closes its descriptor and takes `other`'s.
  SpillFile& operator=(SpillFile&& other) noexcept;
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;
  ~SpillFile() = default;

  // Writes `chunks` of the region to the file. Throws Error (queueing nothing) when a chunk is
  // out of range or given twice, or the file was opened kExisting.
  // REQUIRES (here and below): this file came from open() and was not moved from.
  SpillCompletion spill(std::vector<uint64_t> chunks, SpillCallback on_done = {});
  // Reads `chunks` of the file into the region. Throws as spill() does.
  SpillCompletion restore(std::vector<uint64_t> chunks, SpillCallback on_done = {});
  // fdatasync: what finished spilling survives a crash. Throws Error naming the file.
  void sync();

  const std::string& path() const { return path_; }
  uint64_t chunk_bytes() const { return chunk_bytes_; }
  uint64_t chunk_count() const { return (region_.size() + chunk_bytes_ - 1) / chunk_bytes_; }
  // Bytes of chunk `chunk`: chunk_bytes, or less for the last one. REQUIRES: chunk < chunk_count().
  uint64_t chunk_size(uint64_t chunk) const;
  const SpillBackend& backend() const { return backend_; }

 private:
  SpillCompletion submit(SpillOp op, std::vector<uint64_t> chunks, SpillCallback on_done);

  Os* os_ = nullptr;
  std::string path_;
  std::span<std::byte> region_;
  uint64_t chunk_bytes_ = 0;
  bool read_only_ = false;
  SpillBackend backend_;
  UniqueFd fd_;
  std::unique_ptr<BlockIo> io_;  // after fd_: destroyed first, it drains before the file closes
};

}  // namespace hugepin
