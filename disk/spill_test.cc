// Spill and restore of a real arena region (4 KiB shared memory) to a file on this machine's disk:
// random chunks both ways on every path, completions that carry their chunks, the fallbacks
// (forced by option, by HUGEPIN_SPILL_IO, by a file system without O_DIRECT, by a seccomp filter
// that refuses io_uring), and refusals naming the value.
#include "disk/spill.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <random>

#include "base/error.h"
#include "base/pattern.h"
#include "base/size.h"
#include "disk/test_disk.h"
#include "hugemem/arena.h"
#include "tests/support/error_text.h"
#include "tests/support/fault_os.h"
#include "tests/support/temp_dir.h"

namespace hugepin {
namespace {

constexpr uint64_t kChunk = 256 * kKiB;

// One rank region on 4 KiB shared memory under its own /dev/shm directory, and a directory on
// the real disk for the spill file.
struct Fixture {
  test::TempDir shm{"/dev/shm"};
  test::TempDir disk{test::kDiskDir};
  ArenaOptions arena;
  MappedRegion region;
  std::string path = disk.path() + "/rank-0.spill";

  explicit Fixture(uint64_t bytes = 40 * kChunk + 3 * 4096) {
    arena.page_size = 4 * kKiB;
    arena.shm_dir = shm.path();
    arena.prefault_threads = 1;
    create_arena(real_os(), "hp-spill-file", {{0, bytes, -1}}, arena);
    region = open_region(real_os(), "hp-spill-file", 0, true, arena);
  }
  std::span<std::byte> memory() { return {region.data(), region.size()}; }
};

SpillOptions options_for(SpillIo io) {
  SpillOptions options;
  options.chunk_bytes = kChunk;
  options.io = io;
  options.queue_depth = 8;
  options.request_bytes = 64 * kKiB;
  options.threads = 3;
  return options;
}

std::vector<uint64_t> shuffled_chunks(uint64_t count, uint64_t seed) {
  std::vector<uint64_t> chunks(count);
  for (uint64_t i = 0; i < count; ++i) chunks[i] = i;
  std::mt19937_64 random(seed);
  std::shuffle(chunks.begin(), chunks.end(), random);
  return chunks;
}

// Spills every chunk (in random jobs of random order), zeroes the region, restores every chunk,
// and checks every byte.
void round_trip(SpillFile& file, std::span<std::byte> memory, uint64_t seed) {
  fill_pattern(memory.data(), memory.size(), seed);
  std::vector<uint64_t> chunks = shuffled_chunks(file.chunk_count(), seed);
  std::vector<SpillCompletion> jobs;
  for (size_t first = 0; first < chunks.size(); first += 7) {
    std::vector<uint64_t> job(chunks.begin() + static_cast<long>(first),
                              chunks.begin() + static_cast<long>(std::min(chunks.size(), first + 7)));
    jobs.push_back(file.spill(job));
  }
  for (const SpillCompletion& job : jobs) REQUIRE(job.wait().ok());
  std::memset(memory.data(), 0, memory.size());
  const SpillResult& restored = file.restore(shuffled_chunks(file.chunk_count(), seed + 1)).wait();
  REQUIRE(restored.ok());
  CHECK(restored.bytes == memory.size());
  CHECK_FALSE(find_pattern_mismatch(memory.data(), memory.size(), seed));
}

using test::contains;

// Opens with O_DIRECT fail as on a file system without it.
class NoDirectOs : public test::ForwardingOs {
 public:
  using ForwardingOs::ForwardingOs;
  int openat(int dir_fd, const std::string& name, int flags, mode_t mode) override {
    if ((flags & O_DIRECT) != 0) return -EINVAL;
    return target_.openat(dir_fd, name, flags, mode);
  }
};

// Makes io_uring_setup fail with EPERM in this process from now on, as Docker's default seccomp
// profile does.
bool refuse_io_uring_by_seccomp() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

}  // namespace

TEST_CASE("io_uring + O_DIRECT + fixed buffers: random chunks round-trip" * doctest::skip(!test::io_uring_available() || !test::disk_direct_io())) {
  Fixture fixture;
  SpillFile file = SpillFile::open(real_os(), fixture.path, fixture.memory(), options_for(SpillIo::kUring));
  CHECK(file.backend().uring);
  CHECK(file.backend().direct);
  CHECK(file.backend().fallback.empty());
  if (test::can_lock_memory(fixture.region.size())) CHECK(contains(file.backend().description, "fixed buffers"));
  CHECK(file.chunk_count() == 41);
  CHECK(file.chunk_size(40) == 3 * 4096);  // the short last chunk
  round_trip(file, fixture.memory(), 1);
}

TEST_CASE("the thread pool, forced by option or by HUGEPIN_SPILL_IO, round-trips too" * doctest::skip(!test::disk_direct_io())) {
  Fixture fixture;
  {
    SpillFile file = SpillFile::open(real_os(), fixture.path, fixture.memory(), options_for(SpillIo::kThreads));
    CHECK_FALSE(file.backend().uring);
    CHECK(file.backend().direct);
    CHECK(contains(file.backend().description, "pread/pwrite, 3 threads"));
    round_trip(file, fixture.memory(), 2);
  }
  ::setenv("HUGEPIN_SPILL_IO", "threads", 1);
  SpillFile forced = SpillFile::open(real_os(), fixture.path, fixture.memory(), options_for(SpillIo::kAuto));
  ::unsetenv("HUGEPIN_SPILL_IO");
  CHECK_FALSE(forced.backend().uring);
  CHECK(forced.backend().fallback.empty());  // asked for, not a fallback
  round_trip(forced, fixture.memory(), 3);
  CHECK(effective_spill_io(SpillIo::kAuto) == SpillIo::kAuto);
}

TEST_CASE("a file system without O_DIRECT falls back to a buffered thread pool, or fails when uring is required") {
  Fixture fixture;
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

TEST_CASE("io_uring refused by a seccomp filter: the thread pool takes over; uring required fails with EPERM" * doctest::skip(!test::io_uring_available() || !test::disk_direct_io())) {
  Fixture fixture;
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int code = 0;
    try {
      if (!refuse_io_uring_by_seccomp()) _exit(10);
      SpillFile file = SpillFile::open(real_os(), fixture.path, fixture.memory(), options_for(SpillIo::kAuto));
      if (file.backend().uring || !file.backend().direct) code = 11;
      if (!contains(file.backend().fallback, "refused by a seccomp filter")) code = 12;
      fill_pattern(fixture.region.data(), fixture.region.size(), 5);
      if (!file.spill(shuffled_chunks(file.chunk_count(), 5)).wait().ok()) code = 13;
      std::memset(fixture.region.data(), 0, fixture.region.size());
      if (!file.restore(shuffled_chunks(file.chunk_count(), 6)).wait().ok()) code = 14;
      if (find_pattern_mismatch(fixture.region.data(), fixture.region.size(), 5)) code = 15;
      try {
        SpillFile::open(real_os(), fixture.path, fixture.memory(), options_for(SpillIo::kUring));
        code = 16;
      } catch (const Error& error) {
        if (error.errno_value() != EPERM) code = 17;
      }
    } catch (...) {
      code = 18;
    }
    _exit(code);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("a job's callback runs once, with its chunks, before wait() returns") {
  Fixture fixture;
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

TEST_CASE("bad chunks, sizes and files are refused naming the value" * doctest::skip(!test::disk_direct_io())) {
  Fixture fixture;
  SpillFile file = SpillFile::open(real_os(), fixture.path, fixture.memory(), options_for(SpillIo::kAuto));
  CHECK_THROWS_WITH_AS(file.spill({1, 41}), doctest::Contains("chunk 41 is out of range"), Error);
  CHECK_THROWS_WITH_AS(file.restore({2, 5, 2}), doctest::Contains("chunk 2 is given twice"), Error);

  SpillOptions odd = options_for(SpillIo::kAuto);
  odd.chunk_bytes = 3000;
  CHECK_THROWS_WITH_AS(SpillFile::open(real_os(), fixture.path, fixture.memory(), odd),
                       doctest::Contains("chunk size 3000 is not a multiple of"), Error);

  SpillOptions existing = options_for(SpillIo::kAuto);
  existing.open = SpillOpen::kExisting;
  Fixture smaller(8 * kChunk);
  const std::string wrong_size =
      "holds " + std::to_string(fixture.region.size()) + " bytes; the region has " + std::to_string(8 * kChunk);
  CHECK_THROWS_WITH_AS(SpillFile::open(real_os(), fixture.path, smaller.memory(), existing),
                       doctest::Contains(wrong_size.c_str()), Error);
  SpillFile reader = SpillFile::open(real_os(), fixture.path, fixture.memory(), existing);
  CHECK_THROWS_WITH_AS(reader.spill({0}), doctest::Contains("opened for restore only"), Error);
  CHECK_THROWS_WITH_AS(SpillFile::open(real_os(), fixture.disk.path() + "/absent", fixture.memory(), existing),
                       doctest::Contains("ENOENT"), Error);
}

TEST_CASE("spill errors name the chunk, file, offset and errno; allocation failures come at open") {
  Fixture fixture;
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
