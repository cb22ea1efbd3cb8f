// Spill and restore through io_uring with O_DIRECT and fixed buffers, and the fallback when a
// seccomp filter refuses io_uring (as Docker's default profile does). In disk_uring_test: skips
// (77) without io_uring, O_DIRECT or 16 MiB of lockable memory.
#include <doctest/doctest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "base/error.h"
#include "base/pattern.h"
#include "base/size.h"
#include "disk/spill.h"
#include "disk/test_spill.h"
#include "tests/support/child_process.h"
#include "tests/support/error_text.h"

namespace hugepin {
namespace {

using namespace test;  // the fixtures of the disk tests

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

// In a child, where CHECK cannot report: says what did not hold (on stderr) and passes `ok` on.
bool expect(bool ok, const char* what) {
  if (!ok) std::fprintf(stderr, "child: expected: %s\n", what);
  return ok;
}

}  // namespace

TEST_CASE("io_uring + O_DIRECT + fixed buffers: random chunks round-trip") {
  SpillFixture fixture;
  SpillFile file = SpillFile::open(real_os(), fixture.path, fixture.memory(), options_for(SpillIo::kUring));
  CHECK(file.backend().uring);
  CHECK(file.backend().direct);
  CHECK(file.backend().fallback.empty());
  CHECK(contains(file.backend().description, "fixed buffers"));
  CHECK(file.chunk_count() == 41);
  CHECK(file.chunk_size(40) == 3 * 4096);  // the short last chunk
  round_trip(file, fixture.memory(), 1);
}

TEST_CASE("io_uring refused by a seccomp filter: the thread pool takes over; uring required fails with EPERM") {
  SpillFixture fixture;
  // In a child: a seccomp filter stays for the life of the process.
  const int status = test::run_in_child([&] {
    if (!refuse_io_uring_by_seccomp()) throw Error("cannot install the seccomp filter");
    SpillFile file = SpillFile::open(real_os(), fixture.path, fixture.memory(), options_for(SpillIo::kAuto));
    bool ok = expect(!file.backend().uring && file.backend().direct, "the thread pool with O_DIRECT took over");
    ok &= expect(contains(file.backend().fallback, "refused by a seccomp filter"), "the fallback names the filter");
    fill_pattern(fixture.region.data(), fixture.region.size(), 5);
    ok &= expect(file.spill(shuffled_chunks(file.chunk_count(), 5)).wait().ok(), "the spill succeeds");
    std::memset(fixture.region.data(), 0, fixture.region.size());
    ok &= expect(file.restore(shuffled_chunks(file.chunk_count(), 6)).wait().ok(), "the restore succeeds");
    ok &= expect(!find_pattern_mismatch(fixture.region.data(), fixture.region.size(), 5), "the data came back");
    int required = 0;
    try {
      SpillFile::open(real_os(), fixture.path, fixture.memory(), options_for(SpillIo::kUring));
    } catch (const Error& error) {
      required = error.errno_value();
    }
    return expect(required == EPERM, "requiring io_uring fails with EPERM") && ok;
  });
  CHECK(status == 0);
}

}  // namespace hugepin
