// For the block I/O tests (block_io_direct_test.cc, block_io_uring_test.cc): a file on this
// machine's disk, aligned buffers, and random data moved both ways in odd spans.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/pattern.h"
#include "base/size.h"
#include "disk/block_io.h"
#include "disk/test_disk.h"
#include "tests/support/temp_dir.h"

namespace hugepin::test {

inline constexpr uint64_t kPage = 4096;

struct FreeDeleter {
  void operator()(std::byte* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<std::byte, FreeDeleter>;

inline Buffer aligned_buffer(uint64_t bytes) {
  return Buffer(static_cast<std::byte*>(std::aligned_alloc(kPage, bytes)));
}

struct TestFile {
  TempDir dir{kDiskDir};
  std::string path = dir.path() + "/blocks";
  int fd = -1;
  explicit TestFile(int flags = O_RDWR | O_CREAT | O_DIRECT) {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
  }
  ~TestFile() { ::close(fd); }
  BlockFile block_file() const { return {fd, path, true, kPage}; }
};

// An odd mix of spans over `bytes` of memory and file: sizes of 1 to 700 pages (some larger
// than a request), shuffled, file offsets shuffled independently of memory offsets.
inline std::vector<BlockSpan> odd_spans(std::byte* memory, uint64_t bytes, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<uint64_t> sizes;
  for (uint64_t used = 0; used < bytes;) {
    uint64_t pages = 1 + random() % 700;
    uint64_t size = std::min(pages * kPage, bytes - used);
    sizes.push_back(size);
    used += size;
  }
  std::vector<uint64_t> file_order(sizes.size());
  for (size_t i = 0; i < file_order.size(); ++i) file_order[i] = i;
  std::shuffle(file_order.begin(), file_order.end(), random);
  std::vector<uint64_t> file_offsets(sizes.size());
  uint64_t offset = 0;
  for (size_t index : file_order) {
    file_offsets[index] = offset;
    offset += sizes[index];
  }
  std::vector<BlockSpan> spans;
  uint64_t memory_offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    spans.push_back({file_offsets[i], memory + memory_offset, sizes[i]});
    memory_offset += sizes[i];
  }
  std::shuffle(spans.begin(), spans.end(), random);
  return spans;
}

// Writes random data through `io`, reads it back into other memory, compares.
inline void round_trip(BlockIo& io, uint64_t bytes, uint64_t seed) {
  Buffer source = aligned_buffer(bytes);
  Buffer target = aligned_buffer(bytes);
  fill_pattern(source.get(), bytes, seed);
  std::memset(target.get(), 0, bytes);
  std::vector<BlockSpan> write_spans = odd_spans(source.get(), bytes, seed);
  CAPTURE(write_spans.size());
  BlockResult written = run_blocking(io, BlockOp::kWrite, write_spans);
  REQUIRE(written.ok());
  CHECK(written.bytes == bytes);
  CHECK(written.spans == write_spans.size());
  std::vector<BlockSpan> read_spans = write_spans;
  for (BlockSpan& span : read_spans) span.data = target.get() + (span.data - source.get());
  std::reverse(read_spans.begin(), read_spans.end());
  BlockResult read = run_blocking(io, BlockOp::kRead, read_spans);
  REQUIRE(read.ok());
  CHECK(read.bytes == bytes);
  CHECK_FALSE(find_pattern_mismatch(target.get(), bytes, seed));
}

}  // namespace hugepin::test
