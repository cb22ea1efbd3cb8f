#include "dma/pinning.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>

#include "base/error.h"
#include "base/parallel.h"
#include "base/size.h"

namespace hugepin {

PinnedRegion::~PinnedRegion() {
  try {
    unpin();
  } catch (const Error&) {
    // A destructor cannot report; unpin() is the place to see the error.
  }
}

PinnedRegion::PinnedRegion(PinnedRegion&& other) noexcept { *this = std::move(other); }

PinnedRegion& PinnedRegion::operator=(PinnedRegion&& other) noexcept {
  if (this != &other) {
    try {
      unpin();
    } catch (const Error&) {
    }
    runtime_ = other.runtime_;
    device_ = other.device_;
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    chunk_bytes_ = other.chunk_bytes_;
    device_address_ = std::exchange(other.device_address_, 0);
    chunk_bases_ = std::move(other.chunk_bases_);
    other.chunk_bases_.clear();
  }
  return *this;
}

void PinnedRegion::unpin() {
  std::string failures;
  for (void* chunk : chunk_bases_) {
    if (int rc = runtime_->host_unregister(device_, chunk); rc != 0) {
      failures += cat(failures.empty() ? "" : "; ", "chunk at ", chunk, ": ", runtime_->error_text(rc));
    }
  }
  chunk_bases_.clear();
  base_ = nullptr;
  bytes_ = 0;
  if (!failures.empty()) throw Error(cat("cannot unpin: ", failures));
}

uint64_t pin_chunk_size(uint64_t bytes, const PinOptions& options) {
  const uint64_t alignment = std::max<uint64_t>(options.alignment, 1);
  const uint64_t limit = std::max(alignment, std::min(options.chunk_bytes, kMaxPinChunkBytes) / alignment * alignment);
  const uint64_t threads = std::max(1u, options.threads);
  // Enough chunks for every thread, but never below one alignment unit or above the limit.
  uint64_t share = (bytes + threads - 1) / threads;
  share = (share + alignment - 1) / alignment * alignment;
  return std::clamp(share, alignment, limit);
}

PinnedRegion pin_region(GpuRuntime& runtime, void* base, uint64_t bytes, const PinOptions& options,
                        const PinProgress& progress) {
  if (bytes == 0) throw Error("cannot pin an empty region");
  const uint64_t alignment = std::max<uint64_t>(options.alignment, 1);
  if (reinterpret_cast<uintptr_t>(base) % alignment != 0 || bytes % alignment != 0) {
    throw Error(cat("cannot pin ", format_bytes(bytes), " at ", base, ": not aligned to ", page_size_name(alignment)));
  }
  const uint64_t chunk = pin_chunk_size(bytes, options);
  const size_t chunk_count = (bytes + chunk - 1) / chunk;

  std::vector<int> results(chunk_count, -1);  // -1: not attempted
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex progress_mutex;
  uint64_t pinned = 0;
  auto* first = static_cast<std::byte*>(base);
  auto worker = [&](unsigned) {
    try {
      for (size_t i = next++; i < chunk_count && !failed.load(); i = next++) {
        uint64_t offset = i * chunk;
        uint64_t size = std::min(chunk, bytes - offset);
        results[i] = runtime.host_register(options.device, first + offset, size);
        if (results[i] != 0) {
          failed = true;
          continue;
        }
        std::lock_guard lock(progress_mutex);
        pinned += size;
        if (progress) progress(pinned, bytes);
      }
    } catch (...) {
      failed = true;  // the other threads stop at their next chunk
      throw;
    }
  };
  // An exception from the progress callback stops the pinning; it is rethrown once every thread
  // is done and the chunks registered so far are undone.
  std::exception_ptr thrown;
  try {
    run_on_threads(static_cast<unsigned>(std::min<size_t>(std::max(1u, options.threads), chunk_count)), worker);
  } catch (...) {
    thrown = std::current_exception();
  }

  PinnedRegion region;
  region.runtime_ = &runtime;
  region.device_ = options.device;
  region.base_ = base;
  region.bytes_ = bytes;
  region.chunk_bytes_ = chunk;
  for (size_t i = 0; i < chunk_count; ++i) {
    if (results[i] == 0) region.chunk_bases_.push_back(first + i * chunk);
  }
  if (thrown) {
    try {
      region.unpin();  // undo every chunk registered so far
    } catch (const Error&) {
      // The original failure is the one to report.
    }
    std::rethrow_exception(thrown);
  }
  if (failed) {
    size_t bad = static_cast<size_t>(std::find_if(results.begin(), results.end(), [](int rc) { return rc > 0; }) -
                                     results.begin());
    std::string why = runtime.error_text(results[bad]);
    uint64_t offset = bad * chunk;
    std::string undone = "nothing stays pinned";
    try {
      region.unpin();  // undo every chunk registered so far
    } catch (const Error& error) {
      undone = cat("undoing failed too: ", error.what());
    }
    throw Error(cat("cannot pin chunk ", bad + 1, " of ", chunk_count, " (", format_bytes(std::min(chunk, bytes - offset)),
                    " at offset ", offset, ") for GPU ", options.device, ": ", why, "; ", undone,
                    " (check RLIMIT_MEMLOCK, and that no other registration overlaps)"),
                results[bad]);
  }
  void* device_ptr = nullptr;
  if (int rc = runtime.device_pointer(options.device, base, &device_ptr); rc != 0) {
    std::string why = runtime.error_text(rc);
    try {
      region.unpin();
    } catch (const Error&) {
      // The mapping error is the cause worth reporting.
    }
    throw Error(cat("pinned ", format_bytes(bytes), " but cannot map it for GPU ", options.device, ": ", why), rc);
  }
  region.device_address_ = reinterpret_cast<uintptr_t>(device_ptr);
  return region;
}

}  // namespace hugepin
