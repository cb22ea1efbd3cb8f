#include "disk/region_spill.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <memory>

#include "base/error.h"

namespace hugepin {

RegionSpill::RegionSpill(Os& os, const std::string& path_prefix, const std::vector<SegmentSpan>& segments,
                         SpillOptions options) {
  for (size_t s = 0; s < segments.size(); ++s) {
    options.chunk_bytes = segments[s].chunk_bytes;
    files_.push_back(SpillFile::open(os, cat(path_prefix, ".seg", s, ".spill"), segments[s].bytes, options));
  }
}

void RegionSpill::submit(SpillOp op, const std::vector<uint64_t>& chunks, std::function<void(int error)> done) {
  // Checked against every file first: a job queued on some files only would never complete.
  std::vector<uint64_t> sorted = chunks;
  std::sort(sorted.begin(), sorted.end());
  for (const SpillFile& file : files_) {
    if (!sorted.empty() && sorted.back() >= file.chunk_count()) {
      throw Error(cat("chunk ", sorted.back(), " is out of range: ", file.path(), " has ", file.chunk_count(), " chunks"),
                  ERANGE);
    }
  }
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw Error(cat("chunk ", *std::adjacent_find(sorted.begin(), sorted.end()), " is given twice"), EINVAL);
  }
  struct Parts {
    std::atomic<size_t> left;
    std::atomic<int> error{0};
    std::function<void(int)> done;
  };
  auto parts = std::make_shared<Parts>();
  parts->left = files_.size();
  parts->done = std::move(done);
  auto finished = [parts](const SpillResult& result) {
    if (!result.ok()) {
      int none = 0;
      const int error = result.failures.front().errno_value;
      parts->error.compare_exchange_strong(none, error != 0 ? error : EIO);
    }
    if (--parts->left == 0) parts->done(parts->error.load());
  };
  for (SpillFile& file : files_) op == SpillOp::kSpill ? file.spill(chunks, finished) : file.restore(chunks, finished);
}

void RegionSpill::remove_files(const std::string& path_prefix) {
  if (path_prefix.empty()) return;
  std::error_code ignored;
  const std::filesystem::path dir = std::filesystem::path(path_prefix).parent_path();
  for (const auto& entry : std::filesystem::directory_iterator(dir, ignored)) {
    if (entry.path().string().rfind(path_prefix, 0) == 0) std::filesystem::remove(entry.path(), ignored);
  }
}

}  // namespace hugepin
