// Spill and restore of a real arena region (4 KiB shared memory) to a file on this machine's disk,
// on whatever the machine offers: the fallback to a buffered thread pool on a file system without
// O_DIRECT, completions that carry their chunks, and failures naming chunk, file and errno. The
// paths that need O_DIRECT or io_uring are in spill_direct_test.cc and spill_uring_test.cc.
#include "disk/spill.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "base/pattern.h"
#include "base/size.h"
#include "disk/test_spill.h"
#include "tests/support/error_text.h"
#include "tests/support/fault_os.h"

namespace hugepin {
namespace {

using namespace test;  // the fixtures of the disk tests

// Opens with O_DIRECT fail as on a file system without it.
class NoDirectOs : public test::ForwardingOs {
 public:
  using ForwardingOs::ForwardingOs;
  int openat(int dir_fd, const std::string& name, int flags, mode_t mode) override {
    if ((flags & O_DIRECT) != 0) return -EINVAL;
    return target_.openat(dir_fd, name, flags, mode);
  }
};

}  // namespace

TEST_CASE("a file system without O_DIRECT falls back to a buffered thread pool, or fails when uring is required") {
  SpillFixture fixture;
  NoDirectOs os(real_os());
  SpillFile file = SpillFile::open(os, fixture.path, fixture.memory(), options_for(SpillIo::kAuto));
  CHECK_FALSE(file.backend().uring);
  CHECK_FALSE(file.backend().direct);
  CHECK(file.backend().fallback == "the file system of " + fixture.path + " does not support O_DIRECT (open: EINVAL)");
  CHECK(contains(file.backend().description, "buffered"));
  round_trip(file, fixture.memory(), 4);
  CHECK_THROWS_WITH_AS(SpillFile::open(os, fixture.path, fixture.memory(), options_for(SpillIo::kUring)),
                       doctest::Contains("requires it"), Error);
}

TEST_CASE("a job's callback runs once, with its chunks, before wait() returns") {
  SpillFixture fixture;
  SpillFile file = SpillFile::open(real_os(), fixture.path, fixture.memory(), options_for(SpillIo::kAuto));
  fill_pattern(fixture.region.data(), fixture.region.size(), 7);
  std::atomic<int> calls{0};
  std::vector<uint64_t> seen;
  SpillCompletion job = file.spill({9, 3, 40}, [&](const SpillResult& result) {
    ++calls;
    seen = result.chunks;
    CHECK(result.op == SpillOp::kSpill);
  });
  const SpillResult& result = job.wait();
  CHECK(job.ready());
  CHECK(calls.load() == 1);
  CHECK(seen == std::vector<uint64_t>{9, 3, 40});
  CHECK(result.bytes == 2 * kChunk + 3 * 4096);

  // Restoring some chunks brings back exactly those.
  std::memset(fixture.region.data(), 0, fixture.region.size());
  REQUIRE(file.restore({3, 40}).wait().ok());
  CHECK_FALSE(find_pattern_mismatch(fixture.region.data() + 3 * kChunk, kChunk, 7, 3 * kChunk / 8));
  CHECK_FALSE(find_pattern_mismatch(fixture.region.data() + 40 * kChunk, 3 * 4096, 7, 40 * kChunk / 8));
  std::vector<std::byte> zeros(kChunk);
  CHECK(std::memcmp(fixture.region.data() + 9 * kChunk, zeros.data(), kChunk) == 0);
  CHECK(file.restore({}).wait().ok());  // an empty job completes at once
}

TEST_CASE("spill errors name the chunk, file, offset and errno; allocation failures come at open") {
  SpillFixture fixture;
  test::FaultInjectionOs os(real_os());
  SpillOptions options = options_for(SpillIo::kThreads);
  options.threads = 1;
  options.request_bytes = kChunk;
  SpillFile file = SpillFile::open(os, fixture.path, fixture.memory(), options);
  os.fail("pwrite", ENOSPC, 2);
  const SpillResult& result = file.spill({4, 6, 8, 10}).wait();
  REQUIRE(result.failures.size() == 1);
  CHECK(result.failures[0].chunk == 8);
  CHECK(result.failures[0].message == "cannot write " + fixture.path + " at offset " + std::to_string(8 * kChunk) +
                                          " (262144 bytes): No space left on device (ENOSPC 28)");
  CHECK(result.bytes == 3 * kChunk);
  CHECK_THROWS_WITH_AS(result.throw_if_failed(), doctest::Contains("chunk 8: cannot write"), Error);

  ::unlink(fixture.path.c_str());
  os.fail("fallocate", ENOSPC);
  const std::string no_space =
      "cannot allocate 10.01 MiB for spill file " + fixture.path + ": No space left on device (ENOSPC 28)";
  CHECK_THROWS_WITH_AS(SpillFile::open(os, fixture.path, fixture.memory(), options), doctest::Contains(no_space.c_str()),
                       Error);
}

}  // namespace hugepin
