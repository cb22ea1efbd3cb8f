// The figures `hugepin bench offload` uses to say where a late job's time went on the scheduler's
// side (bench/scheduler_stalls.h): time outside the collect calls, and the /proc readings.
#include "bench/scheduler_stalls.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "tests/support/temp_dir.h"

namespace hugepin::bench {
namespace {

TEST_CASE("outside() counts the parts of a span that no collect call covers; span_at() finds the call") {
  CollectSpans spans;
  spans.add({100, 200, false});
  spans.add({300, 350, true});
  spans.add({350, 400, false});  // back to back: no gap
  spans.add({1000, 1100, true});
  CHECK(spans.outside(120, 180) == 0);      // inside one span
  CHECK(spans.outside(150, 320) == 100);    // 200..300 outside
  CHECK(spans.outside(50, 1050) == 50 + 100 + 600);
  CHECK(spans.outside(400, 1000) == 600);   // exactly a gap
  CHECK(spans.outside(1200, 1300) == 100);  // after every span
  CHECK(spans.outside(10, 20) == 10);       // before every span
  CHECK(spans.outside(180, 180) == 0);
  CHECK(spans.outside(300, 100) == 0);
  CHECK(spans.longest_gap() == 600);
  CHECK(spans.waited_out() == 2);
  auto length = [&spans](int64_t at) -> int64_t {
    const std::optional<CollectSpan> span = spans.span_at(at);
    return span ? span->end_ns - span->start_ns : -1;
  };
  CHECK(length(150) == 100);
  CHECK(length(200) == 100);  // a span's end is in it
  CHECK(length(350) == 50);   // the end of one span, the start of the next: the first
  CHECK(spans.span_at(350)->waited_out);
  CHECK(!spans.span_at(399)->waited_out);
  CHECK(length(250) == -1);
  CHECK(length(50) == -1);    // before the first span
  CHECK(length(2000) == -1);
  CHECK(CollectSpans{}.outside(0, 10) == 10);
  CHECK(CollectSpans{}.longest_gap() == 0);
  CHECK(!CollectSpans{}.span_at(0));
}

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST_CASE("steal comes from /proc/stat's cpu line, the run-queue wait from the thread's schedstat") {
  test::TempDir dir;
  std::unique_ptr<Os> os = make_rooted_os(dir.path());
  // Nothing to read: nothing, not an error (and no steal).
  CHECK(!read_schedstat(*os, "/proc/thread-self/schedstat"));
  CHECK(machine_cpu_ticks(*os).total == 0);
  write(dir.path() + "/proc/thread-self/schedstat", "123456 7890 42\n");
  CHECK(read_schedstat(*os, "/proc/thread-self/schedstat")->wait_ns == 7890);
  // user nice system idle iowait irq softirq steal guest guest_nice
  write(dir.path() + "/proc/stat", "cpu  100 0 50 800 10 5 5 30 20 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n");
  const MachineCpuTicks before = machine_cpu_ticks(*os);
  CHECK(before.steal == 30);
  CHECK(before.total == 1000);  // guest time is inside user: not added twice
  write(dir.path() + "/proc/stat", "cpu  150 0 60 1700 10 5 5 70 20 0\n");
  const MachineCpuTicks after = machine_cpu_ticks(*os);
  CHECK(steal_share(before, after) == doctest::Approx(40.0 / 1000.0));
  CHECK(steal_share(after, after) == 0);
}

}  // namespace
}  // namespace hugepin::bench
