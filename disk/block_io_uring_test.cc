// io_uring block I/O on real files on this machine's disk, opened with O_DIRECT: random data both
// ways in odd spans, with plain and fixed buffers, reads past the end, kernel errors, refused
// spans, and many submitting threads. In disk_uring_test: skips (77) without io_uring, O_DIRECT or
// 16 MiB of lockable memory.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/pattern.h"
#include "base/size.h"
#include "disk/block_io.h"
#include "disk/test_block_io.h"
#include "tests/support/error_text.h"

namespace hugepin {

using namespace test;  // the fixtures of the disk tests

TEST_CASE("io_uring with fixed buffers round-trips random data in odd spans") {
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

TEST_CASE("io_uring uses fixed buffers for spans inside the registered memory") {
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

TEST_CASE("io_uring: a read past the end of the file fails naming where the file ends") {
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

TEST_CASE("io_uring: a kernel error becomes a message naming file, offset, length and errno") {
  TestFile file(O_RDONLY | O_CREAT | O_DIRECT);
  Buffer memory = aligned_buffer(kMiB);
  std::unique_ptr<BlockIo> io = make_uring_block_io(file.block_file(), {});
  BlockResult written = run_blocking(*io, BlockOp::kWrite, {{3 * kMiB, memory.get(), kMiB}});
  REQUIRE(written.failures.size() == 1);
  CHECK(written.failures[0].errno_value == EBADF);
  CHECK(written.failures[0].message ==
        "cannot write " + file.path + " at offset 3145728 (1048576 bytes): Bad file descriptor (EBADF 9)");
}

TEST_CASE("misaligned or empty spans are refused before anything is queued") {
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

TEST_CASE("many threads submit at once; destruction waits for every batch") {
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
