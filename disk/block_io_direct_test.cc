// The thread-pool block I/O on real files on this machine's disk, opened with O_DIRECT: random data
// both ways, short transfers continued, and the file, offset and errno of every failure. In
// disk_direct_test: skips (77) where the disk has no O_DIRECT.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <memory>

#include "base/error.h"
#include "base/pattern.h"
#include "base/size.h"
#include "disk/block_io.h"
#include "disk/test_block_io.h"
#include "tests/support/error_text.h"
#include "tests/support/fault_os.h"

namespace hugepin {
namespace {

using namespace test;  // the fixtures of the disk tests

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

}  // namespace

TEST_CASE("the thread pool round-trips random data in odd spans, with and without O_DIRECT") {
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

TEST_CASE("short reads and writes continue from where they stopped") {
  TestFile file;
  ShortOs os(real_os(), 3 * kPage);
  std::unique_ptr<BlockIo> io = make_thread_pool_block_io(os, file.block_file(), {3, 64 * kKiB});
  round_trip(*io, 4 * kMiB + kPage, 21);
  // No call moved more than 12 KiB: at least this many calls each way (whole requests would
  // have taken about 70).
  const int least = static_cast<int>((4 * kMiB + kPage + 3 * kPage - 1) / (3 * kPage));
  CHECK(os.calls.load() >= 2 * least);
}

TEST_CASE("thread pool: an injected ENOSPC or EIO fails its span only, naming file, offset and errno") {
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

TEST_CASE("thread pool: a direct read cut short off the alignment by the file's end says so, not EINVAL") {
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

}  // namespace hugepin
