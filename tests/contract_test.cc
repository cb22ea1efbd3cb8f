// A violated REQUIRES stops a checked build (base/contract.h): one case per layer, each breaking
// a header's contract in a forked child and reading the line the child wrote before it aborted.
// Skipped (exit 77) in a build that does not check contracts: configure with
// -DHUGEPIN_CONTRACTS=ON, or build Debug.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "base/contract.h"
#include "base/options.h"
#include "base/os.h"
#include "daemon/jobs.h"
#include "disk/crc32c.h"
#include "disk/spill.h"
#include "dma/copy_plan.h"
#include "ipc/arena_control.h"
#include "ipc/report_ring.h"
#include "ipc/test_arena.h"
#include "planner/kv_layout.h"
#include "protocol/completion_quorum.h"
#include "protocol/copy_pins.h"
#include "protocol/retirement_fence.h"
#include "session/chunk_geometry.h"
#include "shim/table_writer.h"
#include "tests/support/child_process.h"
#include "tests/support/gate.h"
#include "tests/support/temp_dir.h"

namespace hugepin {
namespace {

// Runs `body` in a forked child with its stderr captured. Returns what the child wrote when it
// died of SIGABRT; "exited <status>: <what it wrote>" when it did not (the contract did not stop
// it: 0 when body returned, 2 when it threw).
std::string violation(const std::function<void()>& body) {
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  const int status = test::run_in_child([&] {
    const rlimit no_core{0, 0};  // an abort here is the expected outcome, not a crash to keep
    setrlimit(RLIMIT_CORE, &no_core);
    signal(SIGABRT, SIG_DFL);  // not doctest's crash handler: the child reports no test of its own
    dup2(pipe_fds[1], STDERR_FILENO);
    body();
    return true;
  });
  close(pipe_fds[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
  close(pipe_fds[0]);
  return status == -SIGABRT ? text : cat("exited ", status, ": ", text);
}

bool names(const std::string& report, const std::string& file, const std::string& condition) {
  return report.find("hugepin: contract violated at ") == 0 && report.find(file + ":") != std::string::npos &&
         report.find(condition) != std::string::npos;
}

// Ring memory: 128-byte aligned, room for a ring of 8 records.
struct alignas(128) RingMemory {
  std::array<std::byte, 8192> bytes;
};

}  // namespace

TEST_CASE("the report names the file, the line, the condition and the values, then aborts") {
  const int line = __LINE__ + 1;
  const std::string report = violation([] { HUGEPIN_REQUIRE(1 + 1 == 3, "left ", 1 + 1, ", right ", 3); });
  CHECK(report == cat("hugepin: contract violated at ", __FILE__, ":", line, ": 1 + 1 == 3 (left 2, right 3)\n"));
  CHECK(violation([] { HUGEPIN_REQUIRE(1 + 1 == 2, "never shown"); }) == "exited 0: ");
}

TEST_CASE("ipc: ReportRing::init with a capacity that is not a power of two") {
  const std::string report = violation([] {
    static RingMemory memory;
    ReportRing::init(memory.bytes.data(), 3);
  });
  CHECK_MESSAGE(names(report, "ipc/report_ring.cc", "memsize(capacity) != 0"), report);
  CHECK_MESSAGE(report.find("(capacity 3: a power of two from 2 to 16777216)") != std::string::npos, report);
}

TEST_CASE("ipc: ReportRing::init on memory that is not 128-byte aligned") {
  const std::string report = violation([] {
    static RingMemory memory;
    ReportRing::init(memory.bytes.data() + 64, 8);
  });
  CHECK_MESSAGE(names(report, "ipc/report_ring.cc", "% kCacheLinePair == 0"), report);
}

TEST_CASE("ipc: wait_for_any on a doorbell the rings do not ring") {
  const std::string report = violation([] {
    static RingMemory memory;
    static Doorbell other;
    ReportRing* ring = ReportRing::init(memory.bytes.data(), 8);  // sleeps on its own doorbell
    ReportRing* rings[] = {ring};
    wait_for_any(real_os(), other, rings, 0);
  });
  CHECK_MESSAGE(names(report, "ipc/report_ring.cc", "&ring->data_doorbell() == &doorbell"), report);
}

TEST_CASE("ipc: ArenaControl::consume of a rank the arena does not have") {
  test::TestArena arena("contract", test::small_layout(2, 1));
  const std::string report = violation([&] {
    ArenaControl control = ArenaControl::adopt(real_os(), arena.name());
    std::array<Report, 4> out{};
    control.consume(2, out);
  });
  CHECK_MESSAGE(names(report, "ipc/arena_control.cc", "rank < rings_.size()"), report);
  CHECK_MESSAGE(report.find("(rank 2 of 2)") != std::string::npos, report);
}

TEST_CASE("ipc: ArenaControl::publish in a forked child, which did not inherit the scheduler role") {
  test::TestArena arena("contractrole", test::small_layout(2, 1));
  ArenaControl control = ArenaControl::adopt(real_os(), arena.name());
  const std::string report = violation([&] { control.publish({}); });
  CHECK_MESSAGE(names(report, "ipc/arena_control.cc", "owner_pid(owner_) == getpid()"), report);
  CHECK_MESSAGE(report.find(cat("(held for pid ", getpid(), " (0: not held))")) != std::string::npos, report);
}

TEST_CASE("protocol: a report from a rank outside the quorum, a release from a departed rank, a chunk out of range") {
  std::string report = violation([] {
    CompletionQuorum quorum(2, 4);
    quorum.record(quorum.open(JobKind::kStore, {}), 2, true);
  });
  CHECK_MESSAGE(names(report, "protocol/completion_quorum.h", "rank < ranks_"), report);

  report = violation([] {
    RetirementFence fence(2, 4, ComputeBarrier::kRequired);
    fence.begin_epoch();
    fence.leave(1);
    fence.release(1, 1);
  });
  CHECK_MESSAGE(names(report, "protocol/retirement_fence.cc", "member_[rank]"), report);

  report = violation([] { (void)CopyPins(4).holds(4); });
  CHECK_MESSAGE(names(report, "protocol/copy_pins.h", "chunk < records_.size()"), report);
}

TEST_CASE("base: Options::integer of an option that is unset and has no default") {
  const std::string report = violation([] { (void)Options().integer(Option::kRank); });
  CHECK_MESSAGE(names(report, "base/options.cc", "is_set(id)"), report);
  CHECK_MESSAGE(report.find("HUGEPIN_RANK is unset and has no default") != std::string::npos, report);
}

TEST_CASE("disk: checksums into the wrong number of slots, a spill file that was moved from") {
  std::string report = violation([] {
    std::vector<std::byte> data(100);
    std::vector<uint32_t> out(3);
    crc32c_chunks(data.data(), data.size(), 10, out);
  });
  CHECK_MESSAGE(names(report, "disk/crc32c.cc", "out.size() =="), report);
  CHECK_MESSAGE(report.find("(3 checksums for 100 bytes in chunks of 10)") != std::string::npos, report);

  test::TempDir dir;
  report = violation([&] {
    alignas(4096) static std::array<std::byte, 8192> region;  // direct I/O: page-aligned memory
    SpillOptions options;
    options.chunk_bytes = 4096;
    options.io = SpillIo::kThreads;
    SpillFile file = SpillFile::open(real_os(), dir.path() + "/spill", region, options);
    SpillFile taken = std::move(file);
    file.sync();
  });
  CHECK_MESSAGE(names(report, "disk/spill.cc", "io_ != nullptr"), report);
}

TEST_CASE("dma: SM-kernel pieces that are not a multiple of 16 bytes") {
  const std::string report = violation([] {
    uint64_t pieces = 0;
    plan_unit_views({}, Direction::kHostToDevice, 24, &pieces);
  });
  CHECK_MESSAGE(names(report, "dma/copy_plan.cc", "piece_bytes % 16 == 0"), report);
}

TEST_CASE("planner: splitting a storage smaller than its tensor") {
  const std::string report = violation([] {
    planner::TensorDescriptor tensor{"k", {4, 16}, {16, 1}, 2, "s", std::nullopt, 0};
    planner::split_storage(tensor, 64, 4, "ranks[0].tensors[0]");  // the tensor spans 128 bytes
  });
  CHECK_MESSAGE(names(report, "planner/kv_layout.cc", "extent_fits(tensor, storage_bytes)"), report);
}

TEST_CASE("session: the geometry of a rank the layout does not have") {
  const std::string report = violation([] { (void)ChunkGeometry(1, 1, 4, 1, {{64}}).rank(1); });
  CHECK_MESSAGE(names(report, "session/chunk_geometry.h", "rank < ranks_.size()"), report);
}

TEST_CASE("shim: retracting a slot of the allocation table that holds nothing") {
  test::TempDir dir;
  const std::string report = violation([&] { TableWriter::create(real_os(), dir.path())->retract(5); });
  CHECK_MESSAGE(names(report, "shim/table_writer.cc", "live == 1"), report);
}

TEST_CASE("daemon: a job runner started while the daemon's signals are not blocked") {
  const std::string report = violation([] {
    sigset_t handled;
    sigemptyset(&handled);
    sigaddset(&handled, SIGHUP);
    sigset_t unblock = handled;
    pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
    daemon::JobRunner runner(real_os(), handled);
  });
  CHECK_MESSAGE(names(report, "daemon/jobs.cc", "first_unblocked(handled) == 0"), report);
  CHECK_MESSAGE(report.find("(signal 1 is not blocked)") != std::string::npos, report);
}

}  // namespace hugepin

int main(int argc, char** argv) {
  const char* needs = "a build that checks contracts (-DHUGEPIN_CONTRACTS=ON, or a Debug build)";
  if (hugepin::test::pretend_missing("contracts")) {
    return hugepin::test::run_or_skip(argc, argv, hugepin::test::pretended("contracts", needs));
  }
  return hugepin::test::run_or_skip(argc, argv, HUGEPIN_CONTRACTS_CHECKED ? "" : needs);
}
