#include "disk/spill.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "base/contract.h"
#include "base/error.h"
#include "base/log.h"
#include "base/size.h"
#include "base/trusted_file.h"

namespace hugepin {
namespace {

constexpr uint64_t kDefaultDirectAlignment = 4096;

// What O_DIRECT needs on this file: statx's direct I/O alignment, or a page when the file system
// does not say. 0 when it says direct I/O is not supported.
uint64_t direct_alignment(Os& os, int fd) {
  struct statx st {};
  if (os.fstatx(fd, STATX_DIOALIGN, &st) < 0 || (st.stx_mask & STATX_DIOALIGN) == 0) return kDefaultDirectAlignment;
  if (st.stx_dio_offset_align == 0) return 0;
  return std::max<uint64_t>(st.stx_dio_offset_align, st.stx_dio_mem_align);
}

struct OpenedFile {
  UniqueFd fd;
  bool direct = false;
  uint64_t alignment = 1;
  std::string no_direct;  // why not O_DIRECT
};

// A spill file lives in a directory others may share: opened as base/trusted_file.h says (no link
// followed, a regular file of a trusted owner), or -errno of the open itself (EINVAL: no O_DIRECT).
int open_spill(Os& os, const std::string& path, int flags, mode_t mode, UniqueFd* fd) {
  try {
    *fd = open_trusted(os, user_named(path), flags, {FileType::kRegular, FileOwners::kTrusted, "spill file"}, mode).fd;
    return 0;
  } catch (const Error& error) {
    if (error.errno_value() == kRefusedErrno) throw;
    return -error.errno_value();
  }
}

OpenedFile open_file(Os& os, const std::string& path, const SpillOptions& options, SpillIo io) {
  const int flags = options.open == SpillOpen::kCreate ? O_RDWR | O_CREAT : O_RDONLY;
  const std::string verb = options.open == SpillOpen::kCreate ? "cannot open or create" : "cannot open";
  OpenedFile opened;
  int fd = open_spill(os, path, flags | O_DIRECT, options.mode, &opened.fd);
  if (fd >= 0) {
    fd = opened.fd.get();
    opened.alignment = direct_alignment(os, fd);
    if (opened.alignment != 0) {
      opened.direct = true;
      return opened;
    }
    opened.fd.close();
    opened.no_direct = cat("the file system of ", path, " does not support O_DIRECT (statx reports no alignment)");
  } else if (fd == -EINVAL) {
    opened.no_direct = cat("the file system of ", path, " does not support O_DIRECT (open: EINVAL)");
  } else {
    throw_errno(cat(verb, " spill file ", path), -fd);
  }
  if (io == SpillIo::kUring) throw Error(cat(opened.no_direct, "; HUGEPIN_SPILL_IO=uring requires it"), EINVAL);
  if (int rc = open_spill(os, path, flags, options.mode, &opened.fd); rc < 0) {
    throw_errno(cat(verb, " spill file ", path), -rc);
  }
  opened.alignment = 1;
  return opened;
}

void check_alignment(const std::string& path, std::span<std::byte> region, uint64_t chunk_bytes, uint64_t alignment) {
  auto refuse = [&](std::string_view what, uint64_t value) {
    throw Error(cat(what, " ", value, " is not a multiple of ", alignment, " bytes, the direct I/O alignment of ", path));
  };
  if (chunk_bytes % alignment != 0) refuse("chunk size", chunk_bytes);
  if (region.size() % alignment != 0) refuse("region size", region.size());
  if (reinterpret_cast<uintptr_t>(region.data()) % alignment != 0) {
    refuse("region address", reinterpret_cast<uintptr_t>(region.data()));
  }
}

// Gives a created file exactly the region's size, its blocks allocated now (ENOSPC here, not in
// the middle of a spill); checks an existing one has it.
void size_file(Os& os, const std::string& path, int fd, uint64_t bytes, SpillOpen mode) {
  struct stat st {};
  if (int rc = os.fstat(fd, &st); rc < 0) throw_errno(cat("cannot stat spill file ", path), -rc);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (mode == SpillOpen::kExisting) {
    if (size != bytes) {
      throw Error(cat("spill file ", path, " holds ", size, " bytes; the region has ", bytes));
    }
    return;
  }
  if (size > bytes) {
    if (int rc = os.ftruncate(fd, bytes); rc < 0) throw_errno(cat("cannot shorten spill file ", path, " to ", bytes, " bytes"), -rc);
  }
  if (size < bytes) {
    int rc = os.fallocate(fd, 0, bytes);
    if (rc == -EOPNOTSUPP) rc = os.ftruncate(fd, bytes);  // the file system cannot allocate ahead
    if (rc < 0) throw_errno(cat("cannot allocate ", format_bytes(bytes), " for spill file ", path), -rc);
  }
}

std::unique_ptr<BlockIo> make_pool(Os& os, const BlockFile& file, const SpillOptions& options) {
  return make_thread_pool_block_io(os, file, {options.threads, options.request_bytes});
}

}  // namespace

std::string_view spill_io_name(SpillIo io) {
  switch (io) {
    case SpillIo::kAuto: return "auto";
    case SpillIo::kUring: return "uring";
    case SpillIo::kThreads: return "threads";
  }
  return "?";
}

std::optional<SpillIo> parse_spill_io(std::string_view text) {
  for (SpillIo io : {SpillIo::kAuto, SpillIo::kUring, SpillIo::kThreads}) {
    if (text == spill_io_name(io)) return io;
  }
  return std::nullopt;
}

SpillIo effective_spill_io(SpillIo requested) {
  if (requested != SpillIo::kAuto) return requested;
  const char* text = std::getenv("HUGEPIN_SPILL_IO");
  if (text == nullptr || *text == '\0') return requested;
  if (std::optional<SpillIo> io = parse_spill_io(text)) return *io;
  log::warn_once("HUGEPIN_SPILL_IO", cat("HUGEPIN_SPILL_IO='", text, "' is not auto, uring or threads: using auto"));
  return requested;
}

void SpillResult::throw_if_failed() const {
  if (ok()) return;
  const ChunkFailure& first = failures.front();
  std::string more = failures.size() > 1 ? cat(" (", failures.size(), " of ", chunks.size(), " chunks failed)") : "";
  throw Error(cat("chunk ", first.chunk, ": ", first.message, more), first.errno_value);
}

bool SpillCompletion::ready() const {
  std::lock_guard lock(state_->mutex);
  return state_->done;
}

const SpillResult& SpillCompletion::wait() const& {
  std::unique_lock lock(state_->mutex);
  state_->finished.wait(lock, [&] { return state_->done; });
  return state_->result;
}

SpillResult SpillCompletion::wait() const&& {
  const SpillCompletion& self = *this;
  return self.wait();
}

SpillFile SpillFile::open(Os& os, const std::string& path, std::span<std::byte> region, const SpillOptions& options) {
  if (region.empty()) throw Error(cat("cannot open spill file ", path, " for an empty region"));
  if (options.chunk_bytes == 0) throw Error(cat("cannot open spill file ", path, ": chunk size 0"));
  const SpillIo io = effective_spill_io(options.io);
  OpenedFile opened = open_file(os, path, options, io);
  if (opened.direct) check_alignment(path, region, options.chunk_bytes, opened.alignment);
  size_file(os, path, opened.fd.get(), region.size(), options.open);

  SpillFile file;
  file.os_ = &os;
  file.path_ = path;
  file.region_ = region;
  file.chunk_bytes_ = options.chunk_bytes;
  file.read_only_ = options.open == SpillOpen::kExisting;
  file.backend_.direct = opened.direct;
  file.backend_.alignment = opened.alignment;
  const BlockFile block_file{opened.fd.get(), path, opened.direct, opened.alignment};
  file.fd_ = std::move(opened.fd);

  if (io != SpillIo::kThreads && opened.direct) {
    UringOptions uring;
    uring.queue_depth = options.queue_depth;
    uring.submit_batch = options.submit_batch;
    uring.request_bytes = options.request_bytes;
    uring.fixed_memory = region;
    try {
      file.io_ = make_uring_block_io(block_file, uring);
      file.backend_.uring = true;
    } catch (const Error& error) {
      if (io == SpillIo::kUring) throw;
      file.backend_.fallback = error.what();
      log::warn_once("spill-no-uring", cat(error.what(), ": spilling through a pread/pwrite thread pool"));
    }
  } else if (!opened.direct) {
    file.backend_.fallback = opened.no_direct;
    log::warn_once("spill-no-direct", cat(opened.no_direct, ": spilling through a buffered pread/pwrite thread pool"));
  }
  if (!file.io_) file.io_ = make_pool(os, block_file, options);
  file.backend_.description = file.io_->describe();
  return file;
}

SpillFile& SpillFile::operator=(SpillFile&& other) noexcept {
  if (this != &other) {
    io_.reset();  // drain before the descriptor it uses closes
    os_ = other.os_;
    path_ = std::move(other.path_);
    region_ = other.region_;
    chunk_bytes_ = other.chunk_bytes_;
    read_only_ = other.read_only_;
    backend_ = std::move(other.backend_);
    fd_ = std::move(other.fd_);
    io_ = std::move(other.io_);
  }
  return *this;
}

uint64_t SpillFile::chunk_size(uint64_t chunk) const {
  HUGEPIN_REQUIRE(io_ != nullptr, "a spill file that was moved from or not opened");
  HUGEPIN_REQUIRE(chunk < chunk_count(), "chunk ", chunk, " of ", chunk_count());
  const uint64_t offset = chunk * chunk_bytes_;
  return std::min(chunk_bytes_, region_.size() - offset);
}

SpillCompletion SpillFile::spill(std::vector<uint64_t> chunks, SpillCallback on_done) {
  if (read_only_) throw Error(cat("cannot spill to ", path_, ": it was opened for restore only"));
  return submit(SpillOp::kSpill, std::move(chunks), std::move(on_done));
}

SpillCompletion SpillFile::restore(std::vector<uint64_t> chunks, SpillCallback on_done) {
  return submit(SpillOp::kRestore, std::move(chunks), std::move(on_done));
}

SpillCompletion SpillFile::submit(SpillOp op, std::vector<uint64_t> chunks, SpillCallback on_done) {
  HUGEPIN_REQUIRE(io_ != nullptr, "a spill file that was moved from or not opened");
  const uint64_t count = chunk_count();
  std::vector<uint64_t> sorted = chunks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] >= count) {
      throw Error(cat("chunk ", sorted[i], " is out of range: ", path_, " has ", count, " chunks"));
    }
    if (i > 0 && sorted[i] == sorted[i - 1]) throw Error(cat("chunk ", sorted[i], " is given twice"));
  }
  std::vector<BlockSpan> spans;
  spans.reserve(chunks.size());
  for (uint64_t chunk : chunks) {
    const uint64_t offset = chunk * chunk_bytes_;
    spans.push_back({offset, region_.data() + offset, chunk_size(chunk)});
  }
  auto state = std::make_shared<SpillCompletion::State>();
  state->result.op = op;
  state->result.chunks = std::move(chunks);
  io_->submit(op == SpillOp::kSpill ? BlockOp::kWrite : BlockOp::kRead, std::move(spans),
              [state, on_done = std::move(on_done)](BlockResult block) {
                SpillResult& result = state->result;
                result.bytes = block.bytes;
                for (BlockFailure& failure : block.failures) {
                  result.failures.push_back({result.chunks[failure.span], failure.errno_value, std::move(failure.message)});
                }
                if (on_done) on_done(result);
                std::lock_guard lock(state->mutex);
                state->done = true;
                state->finished.notify_all();
              });
  return SpillCompletion(std::move(state));
}

void SpillFile::sync() {
  HUGEPIN_REQUIRE(io_ != nullptr, "a spill file that was moved from or not opened");
  if (int rc = os_->fdatasync(fd_.get()); rc < 0) throw_errno(cat("cannot sync spill file ", path_), -rc);
}

}  // namespace hugepin
