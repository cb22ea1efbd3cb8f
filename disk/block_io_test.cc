// Block I/O on real files on this machine's disk: both implementations move random data both ways,
// continue short transfers, and name the file, offset and errno of every failure.
#include "disk/block_io.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <thread>

#include "base/error.h"
#include "base/pattern.h"
#include "base/size.h"
#include "disk/detail/block_batch.h"
#include "disk/test_disk.h"
#include "tests/support/error_text.h"
#include "tests/support/fault_os.h"
#include "tests/support/temp_dir.h"

namespace hugepin {
namespace {

constexpr uint64_t kPage = 4096;

struct FreeDeleter {
  void operator()(std::byte* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<std::byte, FreeDeleter>;

Buffer aligned_buffer(uint64_t bytes) {
  return Buffer(static_cast<std::byte*>(std::aligned_alloc(kPage, bytes)));
}

struct TestFile {
  test::TempDir dir{test::kDiskDir};
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
std::vector<BlockSpan> odd_spans(std::byte* memory, uint64_t bytes, uint64_t seed) {
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
void round_trip(BlockIo& io, uint64_t bytes, uint64_t seed) {
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

// pread/pwrite that move at most `limit` bytes per call: short transfers on demand.
class ShortOs : public test::ForwardingOs {
 public:
  ShortOs(Os& target, size_t limit) : ForwardingOs(target), limit_(limit) {}
  ssize_t pread(int fd, void* data, size_t bytes, uint64_t offset) override {
    ++calls;
    return target_.pread(fd, data, std::min(bytes, limit_), offset);
  }
  ssize_t pwrite(int fd, const void* data, size_t bytes, uint64_t offset) override {
    ++calls;
    return target_.pwrite(fd, data, std::min(bytes, limit_), offset);
  }
  std::atomic<int> calls{0};

 private:
  size_t limit_;
};

using test::contains;

}  // namespace

TEST_CASE("io_uring with fixed buffers round-trips random data in odd spans" * doctest::skip(!test::io_uring_available() || !test::disk_direct_io())) {
  TestFile file;
  const uint64_t bytes = 37 * kMiB + 5 * kPage;
  for (unsigned depth : {1u, 3u, 32u}) {
    CAPTURE(depth);
    UringOptions options;  // no fixed memory: plain READ/WRITE
    options.queue_depth = depth;
    options.submit_batch = 2;
    options.request_bytes = 256 * kKiB;
    std::unique_ptr<BlockIo> io = make_uring_block_io(file.block_file(), options);
    CHECK(contains(io->describe(), "plain buffers"));
    round_trip(*io, bytes, depth);
  }
}

TEST_CASE("io_uring uses fixed buffers for spans inside the registered memory" *
          doctest::skip(!test::io_uring_available() || !test::disk_direct_io() || !test::can_lock_memory(16 * kMiB))) {
  TestFile file;
  const uint64_t bytes = 3 * kMiB;
  Buffer memory = aligned_buffer(2 * bytes);
  UringOptions options;
  options.fixed_memory = {memory.get(), 2 * bytes};
  options.require_fixed = true;  // an error rather than a quiet fallback
  std::unique_ptr<BlockIo> io = make_uring_block_io(file.block_file(), options);
  CHECK(contains(io->describe(), "fixed buffers"));
  fill_pattern(memory.get(), bytes, 5);
  std::vector<BlockSpan> spans = odd_spans(memory.get(), bytes, 5);
  REQUIRE(run_blocking(*io, BlockOp::kWrite, spans).ok());
  for (BlockSpan& span : spans) span.data += bytes;  // the second half, also registered
  REQUIRE(run_blocking(*io, BlockOp::kRead, spans).ok());
  CHECK_FALSE(find_pattern_mismatch(memory.get() + bytes, bytes, 5));
}

TEST_CASE("the thread pool round-trips random data in odd spans, with and without O_DIRECT" * doctest::skip(!test::disk_direct_io())) {
  for (bool direct : {true, false}) {
    CAPTURE(direct);
    TestFile file(O_RDWR | O_CREAT | (direct ? O_DIRECT : 0));
    BlockFile block_file = file.block_file();
    block_file.direct = direct;
    block_file.alignment = direct ? kPage : 1;
    std::unique_ptr<BlockIo> io = make_thread_pool_block_io(real_os(), block_file, {5, 192 * kKiB});
    round_trip(*io, 21 * kMiB + 3 * kPage, direct ? 11 : 12);
  }
}

TEST_CASE("short reads and writes continue from where they stopped" * doctest::skip(!test::disk_direct_io())) {
  TestFile file;
  ShortOs os(real_os(), 3 * kPage);
  std::unique_ptr<BlockIo> io = make_thread_pool_block_io(os, file.block_file(), {3, 64 * kKiB});
  round_trip(*io, 4 * kMiB + kPage, 21);
  // No call moved more than 12 KiB: at least this many calls each way (whole requests would
  // have taken about 70).
  const int least = static_cast<int>((4 * kMiB + kPage + 3 * kPage - 1) / (3 * kPage));
  CHECK(os.calls.load() >= 2 * least);
}

TEST_CASE("thread pool: an injected ENOSPC or EIO fails its span only, naming file, offset and errno" * doctest::skip(!test::disk_direct_io())) {
  TestFile file;
  test::FaultInjectionOs os(real_os());
  std::unique_ptr<BlockIo> io = make_thread_pool_block_io(os, file.block_file(), {1, kMiB});
  Buffer memory = aligned_buffer(8 * kMiB);
  fill_pattern(memory.get(), 8 * kMiB, 1);
  std::vector<BlockSpan> spans;
  for (uint64_t i = 0; i < 8; ++i) spans.push_back({i * kMiB, memory.get() + i * kMiB, kMiB});

  os.fail("pwrite", ENOSPC, 5);  // one thread, 1 MiB requests: the sixth span
  BlockResult written = run_blocking(*io, BlockOp::kWrite, spans);
  REQUIRE(written.failures.size() == 1);
  const BlockFailure& failure = written.failures[0];
  CHECK(failure.span == 5);
  CHECK(failure.offset == 5 * kMiB);
  CHECK(failure.errno_value == ENOSPC);
  CHECK(failure.message == "cannot write " + file.path + " at offset 5242880 (1048576 bytes): No space left on device (ENOSPC 28)");
  CHECK(written.bytes == 7 * kMiB);
  CHECK_THROWS_WITH_AS(throw_if_failed(written), doctest::Contains("ENOSPC"), Error);

  REQUIRE(run_blocking(*io, BlockOp::kWrite, spans).ok());
  os.fail("pread", EIO, 2);
  BlockResult read = run_blocking(*io, BlockOp::kRead, spans);
  REQUIRE(read.failures.size() == 1);
  CHECK(read.failures[0].span == 2);
  CHECK(read.failures[0].errno_value == EIO);
  CHECK(contains(read.failures[0].message, "cannot read " + file.path + " at offset 2097152"));
  CHECK(contains(read.failures[0].message, "(EIO 5)"));
}

TEST_CASE("thread pool: a direct read cut short off the alignment by the file's end says so, not EINVAL" * doctest::skip(!test::disk_direct_io())) {
  TestFile file;
  Buffer memory = aligned_buffer(4 * kPage);
  fill_pattern(memory.get(), 4 * kPage, 3);
  std::unique_ptr<BlockIo> io = make_thread_pool_block_io(real_os(), file.block_file(), {1, kMiB});
  REQUIRE(run_blocking(*io, BlockOp::kWrite, {{0, memory.get(), 3 * kPage}}).ok());
  REQUIRE(truncate(file.path.c_str(), 2 * kPage + 100) == 0);  // a file of an odd size
  BlockResult read = run_blocking(*io, BlockOp::kRead, {{0, memory.get(), 3 * kPage}});
  REQUIRE(read.failures.size() == 1);
  CHECK(read.failures[0].offset == 2 * kPage + 100);
  CHECK(read.failures[0].errno_value == 0);
  CHECK(contains(read.failures[0].message, "the file ends before it"));
}

TEST_CASE("io_uring: a read past the end of the file fails naming where the file ends" * doctest::skip(!test::io_uring_available() || !test::disk_direct_io())) {
  TestFile file;
  Buffer memory = aligned_buffer(4 * kPage);
  fill_pattern(memory.get(), 4 * kPage, 2);
  std::unique_ptr<BlockIo> io = make_uring_block_io(file.block_file(), {});
  REQUIRE(run_blocking(*io, BlockOp::kWrite, {{0, memory.get(), 2 * kPage}}).ok());
  // The first span ends short at the file's end; the second starts beyond it.
  BlockResult read = run_blocking(*io, BlockOp::kRead, {{kPage, memory.get(), 2 * kPage}, {4 * kPage, memory.get() + 2 * kPage, kPage}});
  REQUIRE(read.failures.size() == 2);
  CHECK(read.failures[0].offset == 2 * kPage);
  CHECK(read.failures[0].message == "cannot read " + file.path + " at offset 8192 (4096 bytes): the file ends before it");
  CHECK(read.failures[1].offset == 4 * kPage);
  CHECK(read.failures[1].errno_value == 0);
  CHECK(read.bytes == 0);
}

TEST_CASE("io_uring: a kernel error becomes a message naming file, offset, length and errno" * doctest::skip(!test::io_uring_available() || !test::disk_direct_io())) {
  TestFile file(O_RDONLY | O_CREAT | O_DIRECT);
  Buffer memory = aligned_buffer(kMiB);
  std::unique_ptr<BlockIo> io = make_uring_block_io(file.block_file(), {});
  BlockResult written = run_blocking(*io, BlockOp::kWrite, {{3 * kMiB, memory.get(), kMiB}});
  REQUIRE(written.failures.size() == 1);
  CHECK(written.failures[0].errno_value == EBADF);
  CHECK(written.failures[0].message ==
        "cannot write " + file.path + " at offset 3145728 (1048576 bytes): Bad file descriptor (EBADF 9)");
}

TEST_CASE("misaligned or empty spans are refused before anything is queued" * doctest::skip(!test::io_uring_available() || !test::disk_direct_io())) {
  TestFile file;
  Buffer memory = aligned_buffer(2 * kPage);
  std::unique_ptr<BlockIo> io = make_uring_block_io(file.block_file(), {});
  CHECK_THROWS_WITH_AS(io->submit(BlockOp::kWrite, {{0, memory.get(), kPage}, {100, memory.get(), kPage}}, {}),
                       doctest::Contains("cannot queue span 1 (offset 100"), Error);
  CHECK_THROWS_WITH_AS(io->submit(BlockOp::kWrite, {{0, memory.get() + 8, kPage}}, {}),
                       doctest::Contains("aligned to 4096 bytes"), Error);
  CHECK_THROWS_WITH_AS(io->submit(BlockOp::kRead, {{0, memory.get(), 0}}, {}), doctest::Contains("it is empty"), Error);
  bool called = false;
  io->submit(BlockOp::kRead, {}, [&](BlockResult result) {
    called = true;
    CHECK(result.ok());
  });
  CHECK(called);  // an empty list completes at once
}

TEST_CASE("requests are cut at the request size and at registered buffer edges") {
  std::byte* base = reinterpret_cast<std::byte*>(uintptr_t{1} << 30);
  std::vector<BlockSpan> spans{{0, base + 3 * kPage, 10 * kPage}, {kMiB, base + 20 * kPage, 2 * kPage}};
  std::vector<detail::BlockRequest> requests = detail::split_requests(spans, 4 * kPage, {base, 8 * kPage});
  std::vector<uint64_t> sizes;
  for (const detail::BlockRequest& request : requests) sizes.push_back(request.bytes / kPage);
  // Span 0 covers pages 3..12: cut at 4 pages and at the edge at page 8 and 16.
  CHECK(sizes == std::vector<uint64_t>{4, 1, 4, 1, 2});
  CHECK(requests[1].offset == 4 * kPage);
  CHECK(requests[2].data == base + 8 * kPage);
  CHECK(requests[4].span == 1);
  CHECK(detail::usable_request_bytes(1000, 4096) == 4096);
  CHECK(detail::usable_request_bytes(10000, 4096) == 8192);
  CHECK(detail::usable_request_bytes(4 * kGiB, 512) == kGiB);
}

TEST_CASE("many threads submit at once; destruction waits for every batch" * doctest::skip(!test::io_uring_available() || !test::disk_direct_io())) {
  TestFile file;
  const uint64_t per_thread = 2 * kMiB;
  const unsigned threads = 4;
  Buffer memory = aligned_buffer(per_thread * threads);
  std::atomic<int> completed{0};
  for (bool uring : {true, false}) {
    CAPTURE(uring);
    completed = 0;
    {
      std::unique_ptr<BlockIo> io = uring ? make_uring_block_io(file.block_file(), {})
                                          : make_thread_pool_block_io(real_os(), file.block_file(), {4, 128 * kKiB});
      std::vector<std::thread> submitters;
      for (unsigned t = 0; t < threads; ++t) {
        submitters.emplace_back([&, t] {
          for (int round = 0; round < 20; ++round) {
            std::byte* data = memory.get() + t * per_thread;
            io->submit(BlockOp::kWrite, {{t * per_thread, data, per_thread}}, [&](BlockResult result) {
              CHECK(result.ok());
              ++completed;
            });
          }
        });
      }
      for (std::thread& submitter : submitters) submitter.join();
    }  // destroyed here, with batches possibly still queued
    CHECK(completed.load() == 20 * static_cast<int>(threads));
  }
}

}  // namespace hugepin
