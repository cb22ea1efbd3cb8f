// Workers attaching to ranks and the scheduler adopting the arena: claims, refusals, takeovers of
// dead holders, reports on the rings, backpressure, and the scheduler's figures.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <vector>

#include "base/error.h"
#include "base/process.h"
#include "ipc/arena_control.h"
#include "ipc/arena_lock.h"
#include "ipc/rank_attachment.h"
#include "ipc/test_arena.h"
#include "tests/support/error_text.h"
#include "tests/support/fault_os.h"

namespace hugepin {
namespace {

using test::error_of;
using test::contains;

std::vector<Report> drain(ArenaControl& control, uint32_t rank) {
  std::vector<Report> all;
  Report out[64];
  while (size_t n = control.consume(rank, out)) all.insert(all.end(), out, out + n);
  return all;
}

// Forks a child that attaches to (tp_rank, 0) and then dies without detaching (SIGKILL).
pid_t attach_and_die(const test::TestArena& arena, uint32_t tp_rank) {
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  std::fflush(nullptr);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    char ok = 0;
    try {
      RankAttachment attachment = test::attach_rank(arena, tp_rank, 0);
      ok = 1;
      (void)!write(pipe_fds[1], &ok, 1);
      pause();
    } catch (const std::exception& error) {
      std::fprintf(stderr, "child: %s\n", error.what());
    }
    (void)!write(pipe_fds[1], &ok, 1);
    _exit(1);
  }
  char ok = 0;
  REQUIRE(read(pipe_fds[0], &ok, 1) == 1);
  REQUIRE(ok == 1);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  kill(pid, SIGKILL);
  return pid;
}

}  // namespace

TEST_CASE("a worker attaches to its rank, maps its region and reports it") {
  test::TestArena arena("attach", test::small_layout(2, 2));
  ArenaControl scheduler = ArenaControl::adopt(real_os(), arena.name());
  RankAttachment worker = test::attach_rank(arena, 1, 1);
  CHECK(worker.rank() == 3);
  CHECK(worker.tp_rank() == 1);
  CHECK(worker.pp_rank() == 1);
  CHECK(worker.region().size() == 4 * (16 + 4) * kKiB);
  CHECK(worker.region().path() == arena.created().data.regions[3].path);
  CHECK(worker.payload_bytes_per_block() == 20 * kKiB);
  CHECK_FALSE(worker.took_over());
  CHECK(worker.attach_generation() == 1);
  std::memset(worker.region().data(), 0x5A, worker.region().size());  // writable

  RankStatus status = scheduler.rank_status(3);
  CHECK(status.pid == getpid());
  CHECK(status.alive);
  CHECK(status.state == static_cast<uint8_t>(RankState::kAttached));
  CHECK(status.heartbeat_ns > 0);
  CHECK(scheduler.rank_status(0).pid == 0);

  std::vector<Report> reports = drain(scheduler, 3);
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].kind == ReportKind::kAttach);
  CHECK(reports[0].rank == 3);
  CHECK(reports[0].sequence == 1);
  CHECK(reports[0].value == static_cast<uint64_t>(getpid()));

  worker.post(ReportKind::kCopyComplete, 77);
  std::vector<Report> batch(3, Report{ReportKind::kComputeRelease, 0, 0, 0, 5, 0});
  worker.post_batch(batch);
  CHECK(worker.heartbeat());
  worker.set_state(RankState::kReady);
  worker.set_pinned_bytes(worker.region().size());
  CHECK(scheduler.rank_status(3).state == static_cast<uint8_t>(RankState::kReady));
  CHECK(scheduler.rank_status(3).pinned_bytes == worker.region().size());
  CHECK(scheduler.wait_for_reports(0));
  reports = drain(scheduler, 3);
  REQUIRE(reports.size() == 5);
  for (size_t i = 0; i < reports.size(); ++i) CHECK(reports[i].sequence == i + 2);
  CHECK(reports[0].value == 77);
  CHECK(reports[4].kind == ReportKind::kHeartbeat);

  worker.detach();
  CHECK_FALSE(worker.attached());
  reports = drain(scheduler, 3);
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].kind == ReportKind::kDetach);
  CHECK(reports[0].sequence == 7);
  status = scheduler.rank_status(3);
  CHECK(status.owner == 0);
  CHECK(status.state == static_cast<uint8_t>(RankState::kDetached));
  CHECK(contains(error_of([&] { worker.post(ReportKind::kCopyComplete, 1); }), "is not attached"));

  // Attaching again after a clean detach is not a takeover.
  RankAttachment again = test::attach_rank(arena, 1, 1);
  CHECK_FALSE(again.took_over());
  CHECK(again.attach_generation() == 2);
  CHECK(scheduler.rank_status(3).takeovers == 0);
}

TEST_CASE("a second live attach to a rank is refused, naming the rank and the holder") {
  test::TestArena arena("second");
  RankAttachment worker = test::attach_rank(arena, 0, 0);
  CHECK(contains(error_of([&] { test::attach_rank(arena, 0, 0); }),
                 cat("rank 0 (tp 0, pp 0) of arena '", arena.name(), "' is already attached by this process (pid ",
                     getpid(), ")")));
  const std::string expected = cat("rank 0 (tp 0, pp 0) of arena '", arena.name(), "' is attached by live pid ", getpid());
  CHECK(test::run_in_child([&] {
          return contains(error_of([&] { test::attach_rank(arena, 0, 0); }), expected);
        }) == 0);
  // The child's refusal changed nothing.
  ControlSegment segment = ControlSegment::open(real_os(), arena.name(), SegmentAccess::kReadOnly);
  CHECK(read_rank_status(real_os(), segment.view().regions[0]).pid == getpid());
  CHECK(contains(error_of([&] { test::attach_rank(arena, 2, 0); }),
                 cat("rank (tp 2, pp 0) is outside arena '", arena.name(), "' (tp 2 x pp 1)")));
}

TEST_CASE("a rank whose worker died is taken over and counted; the scheduler can mark it dead first") {
  test::TestArena arena("takeover");
  ArenaControl scheduler = ArenaControl::adopt(real_os(), arena.name());
  pid_t dead = attach_and_die(arena, 1);
  // Not yet reaped: a zombie is dead too.
  siginfo_t info{};
  REQUIRE(waitid(P_PID, static_cast<id_t>(dead), &info, WEXITED | WNOWAIT) == 0);
  RankStatus status = scheduler.rank_status(1);
  CHECK(status.pid == dead);
  CHECK_FALSE(status.alive);
  CHECK(scheduler.mark_dead_if_gone(1));
  CHECK_FALSE(scheduler.mark_dead_if_gone(1));  // once
  CHECK(scheduler.rank_status(1).state == static_cast<uint8_t>(RankState::kDead));
  CHECK_FALSE(scheduler.mark_dead_if_gone(0));  // never attached
  REQUIRE(waitpid(dead, nullptr, 0) == dead);

  RankAttachment worker = test::attach_rank(arena, 1, 0);
  CHECK(worker.took_over());
  CHECK(worker.attach_generation() == 2);
  status = scheduler.rank_status(1);
  CHECK(status.takeovers == 1);
  CHECK(status.pid == getpid());
  CHECK(status.state == static_cast<uint8_t>(RankState::kAttached));
  CHECK_FALSE(scheduler.mark_dead_if_gone(1));  // alive

  // Both attaches reported, in one sequence: the new worker continued the dead one's ring.
  std::vector<Report> reports = drain(scheduler, 1);
  REQUIRE(reports.size() == 2);
  CHECK(reports[0].value == static_cast<uint64_t>(dead));
  CHECK(reports[1].value == static_cast<uint64_t>(getpid()));
  CHECK(reports[1].sequence == 2);
}

TEST_CASE("a full ring pushes back: EAGAIN after the post timeout, nothing lost") {
  test::TestArena arena("backpressure", test::small_layout(1, 1), ControlOptions{4});
  ArenaControl scheduler = ArenaControl::adopt(real_os(), arena.name());
  AttachOptions options;
  options.post_timeout_ns = 1'000'000;
  RankAttachment worker = test::attach_rank(arena, 0, 0, options);  // 1 in the ring
  for (uint64_t job = 1; job <= 3; ++job) worker.post(ReportKind::kCopyComplete, job);
  std::string message = error_of([&] { worker.post(ReportKind::kCopyComplete, 4); });
  CHECK(contains(message, "the report ring of rank 0 stayed full for 1 ms"));
  CHECK(contains(message, "posted 0 of 1 reports"));
  std::vector<Report> five(5, Report{ReportKind::kCopyComplete, 0, 0, 0, 9, 0});
  CHECK(worker.try_post(five) == 0);
  CHECK_FALSE(worker.heartbeat());

  CHECK(drain(scheduler, 0).size() == 4);
  CHECK(worker.try_post(five) == 4);
  CHECK(contains(error_of([&] { worker.post_batch(five); }), "posted 0 of 5"));
  std::vector<Report> reports = drain(scheduler, 0);
  worker.post(ReportKind::kCopyComplete, 4);
  std::vector<Report> last = drain(scheduler, 0);
  reports.insert(reports.end(), last.begin(), last.end());
  REQUIRE(reports.size() == 5);
  for (size_t i = 0; i < reports.size(); ++i) CHECK(reports[i].sequence == 5 + i);  // no gap, no repeat
}

TEST_CASE("one scheduler at a time; a dead one's role is taken over and the generation moves") {
  test::TestArena arena("scheduler");
  uint64_t first_generation = 0;
  {
    ArenaControl scheduler = ArenaControl::adopt(real_os(), arena.name());
    first_generation = scheduler.generation();
    CHECK(first_generation == 2);  // 1 at creation
    CHECK(contains(error_of([&] { ArenaControl::adopt(real_os(), arena.name()); }),
                   "this process already holds the scheduler role"));
    const std::string expected = cat("arena '", arena.name(), "' already has a scheduler: live pid ", getpid());
    CHECK(test::run_in_child([&] {
            return contains(error_of([&] { ArenaControl::adopt(real_os(), arena.name()); }), expected);
          }) == 0);
    ArenaLayout layout = scheduler.layout();
    CHECK(layout.tp == 2);
    CHECK(layout.ranks.size() == 2);
    CHECK(layout.ranks[1].payload_bytes_per_block == 16 * kKiB);
  }
  ArenaControl again = ArenaControl::adopt(real_os(), arena.name());  // given back when destroyed
  CHECK(again.generation() == first_generation + 1);
  again = ArenaControl();

  // A scheduler that dies holding the role: the next one takes over.
  CHECK(test::run_in_child([&] {
          ArenaControl scheduler = ArenaControl::adopt(real_os(), arena.name());
          std::fflush(nullptr);
          _exit(0);  // no destructor: the role stays with a dead pid
          return true;
        }) == 0);
  ArenaControl after = ArenaControl::adopt(real_os(), arena.name());
  CHECK(after.generation() == first_generation + 3);
}

TEST_CASE("the scheduler's figures are published whole, and a torn write is flagged") {
  test::TestArena arena("figures");
  ArenaControl scheduler = ArenaControl::adopt(real_os(), arena.name());
  ControlSegment reader = ControlSegment::open(real_os(), arena.name(), SegmentAccess::kReadOnly);
  SchedulerReading reading = read_scheduler_figures(*reader.view().counters);
  CHECK(reading.consistent);
  CHECK(reading.updated_ns == 0);
  CHECK(reading.figures.pinned_chunks == 0);

  PublishedFigures figures{1, 2, 3, 4, 5, 6, 7, 8};
  scheduler.publish(figures);
  reading = read_scheduler_figures(*reader.view().counters);
  CHECK(reading.consistent);
  CHECK(reading.updated_ns > 0);
  CHECK(reading.figures.pinned_chunks == 1);
  CHECK(reading.figures.jobs_waiting_quorum == 2);
  CHECK(reading.figures.retired_chunks_waiting_fence == 3);
  CHECK(reading.figures.dead_ranks == 4);
  CHECK(reading.figures.jobs_completed == 5);
  CHECK(reading.figures.jobs_failed == 6);
  CHECK(reading.figures.reports_applied == 7);
  CHECK(reading.figures.reports_rejected == 8);

  // A writer that died mid-write leaves the version odd: readers say so instead of waiting.
  SchedulerCounters& counters = scheduler.segment().scheduler_counters();
  counters.version.fetch_add(1);
  CHECK_FALSE(read_scheduler_figures(*reader.view().counters).consistent);
  scheduler.publish(figures);  // the next write recovers
  CHECK(read_scheduler_figures(*reader.view().counters).consistent);
}

TEST_CASE("a scheduler asleep on the arena's doorbell wakes for a worker in another process") {
  test::TestArena arena("doorbell", test::small_layout(4, 1));
  ArenaControl scheduler = ArenaControl::adopt(real_os(), arena.name());
  CHECK_FALSE(scheduler.wait_for_reports(1'000'000));
  std::fflush(nullptr);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    try {
      RankAttachment worker = test::attach_rank(arena, 2, 0);
      worker.detach();
      _exit(0);
    } catch (...) {
      _exit(1);
    }
  }
  CHECK(scheduler.wait_for_reports(-1));
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WEXITSTATUS(status) == 0);
  std::vector<Report> reports = drain(scheduler, 2);
  while (reports.size() < 2 && scheduler.wait_for_reports(-1)) {
    std::vector<Report> more = drain(scheduler, 2);
    reports.insert(reports.end(), more.begin(), more.end());
  }
  REQUIRE(reports.size() == 2);
  CHECK(reports[0].kind == ReportKind::kAttach);
  CHECK(reports[1].kind == ReportKind::kDetach);
  CHECK(reports[0].value == static_cast<uint64_t>(pid));
}

TEST_CASE("claims and a retention destroy exclude each other through the arena's lock") {
  test::TestArena arena("lock");
  {
    // A claim in progress: the destroy lock is refused, without waiting.
    ControlSegment segment = ControlSegment::open(real_os(), arena.name(), SegmentAccess::kReadOnly);
    ControlSegment other = ControlSegment::open(real_os(), arena.name(), SegmentAccess::kReadOnly);
    ArenaClaimLock claim = ArenaClaimLock::take(real_os(), segment, arena.name());
    ArenaClaimLock second = ArenaClaimLock::take(real_os(), other, arena.name(), 0);  // claims share it: no wait
    CHECK_FALSE(ArenaDestroyLock::try_take(real_os(), arena.name()).has_value());
  }
  std::optional<ArenaDestroyLock> destroy = ArenaDestroyLock::try_take(real_os(), arena.name());
  REQUIRE(destroy.has_value());
  CHECK_FALSE(ArenaDestroyLock::try_take(real_os(), arena.name()).has_value());  // one destroy at a time
  {
    // A claim gives up after its timeout, naming the segment, and changes nothing.
    ControlSegment segment = ControlSegment::open(real_os(), arena.name(), SegmentAccess::kReadOnly);
    CHECK(contains(error_of([&] { ArenaClaimLock::take(real_os(), segment, arena.name(), 20'000'000); }),
                   cat("control segment ", segment.path(), " has been locked exclusively for ")));
  }

  // A worker that opened the segment before the destroy waits for the lock, then finds the arena
  // gone; a full attach in another child cannot claim its rank while the destroy holds the lock.
  int opened[2];
  REQUIRE(pipe(opened) == 0);
  std::fflush(nullptr);
  pid_t waiter = fork();
  REQUIRE(waiter >= 0);
  if (waiter == 0) {
    destroy.reset();  // the child's copy of the locked descriptor (flock locks follow copies)
    close(opened[0]);
    int code = 1;
    try {
      ControlSegment segment = ControlSegment::open(real_os(), arena.name(), SegmentAccess::kReadWrite);
      char byte = 1;
      (void)!write(opened[1], &byte, 1);
      std::string why = error_of([&] { ArenaClaimLock::take(real_os(), segment, arena.name()); });
      if (contains(why, cat("arena '", arena.name(), "' was destroyed while this process was claiming a role in it"))) {
        code = 0;
      } else {
        std::fprintf(stderr, "waiter: %s\n", why.c_str());
      }
    } catch (const std::exception& error) {
      std::fprintf(stderr, "waiter: %s\n", error.what());
    }
    _exit(code);
  }
  close(opened[1]);
  char byte = 0;
  REQUIRE(read(opened[0], &byte, 1) == 1);
  close(opened[0]);
  pid_t attacher = fork();
  REQUIRE(attacher >= 0);
  if (attacher == 0) {
    destroy.reset();
    // Fails either way once the arena is gone: waiting on the lock, or opening no segment.
    const std::string why = error_of([&] { test::attach_rank(arena, 0, 0); });
    _exit(contains(why, "was destroyed") || contains(why, "cannot open control segment") ? 0 : 1);
  }
  pid_t adopter = fork();
  REQUIRE(adopter >= 0);
  if (adopter == 0) {
    destroy.reset();
    const std::string why = error_of([&] { ArenaControl::adopt(real_os(), arena.name()); });
    _exit(contains(why, "was destroyed") || contains(why, "cannot open control segment") ? 0 : 1);
  }
  usleep(200 * 1000);  // time for the children to reach the lock (or not: the checks hold either way)
  {
    ControlSegment segment = ControlSegment::open(real_os(), arena.name(), SegmentAccess::kReadOnly);
    CHECK(read_rank_status(real_os(), segment.view().regions[0]).pid == 0);  // nobody claimed rank 0
  }
  destroy_arena_with_control(real_os(), arena.name(), arena.options());
  destroy.reset();
  int status = 0;
  REQUIRE(waitpid(waiter, &status, 0) == waiter);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  REQUIRE(waitpid(attacher, &status, 0) == attacher);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  REQUIRE(waitpid(adopter, &status, 0) == adopter);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
}

// Unlinks the control segment at the moment the destroy lock is taken: a segment opened by name,
// then destroyed (and perhaps re-created) by someone else before the lock.
class UnlinkAtLockOs final : public test::ForwardingOs {
 public:
  UnlinkAtLockOs(Os& target, std::string path) : ForwardingOs(target), path_(std::move(path)) {}
  int flock(int fd, int operation) override {
    if (operation == (LOCK_EX | LOCK_NB)) ::unlink(path_.c_str());
    return ForwardingOs::flock(fd, operation);
  }

 private:
  std::string path_;
};

TEST_CASE("the destroy lock refuses a segment unlinked between its open and its lock") {
  test::TestArena arena("unlinked");
  UnlinkAtLockOs os(real_os(), control_segment_path(arena.name()));
  CHECK_FALSE(ArenaDestroyLock::try_take(os, arena.name()).has_value());
}

}  // namespace hugepin
