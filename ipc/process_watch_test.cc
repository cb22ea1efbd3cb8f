#include "ipc/process_watch.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "base/error.h"
#include "tests/support/fault_os.h"

namespace hugepin {
namespace {

// A child process that waits to be killed.
pid_t start_child() {
  pid_t pid = fork();
  if (pid == 0) {
    for (;;) pause();
  }
  REQUIRE(pid > 0);
  return pid;
}

std::vector<uint32_t> poll(ProcessWatch& watch) {
  std::vector<uint32_t> gone;
  watch.poll(&gone);
  return gone;
}

// Polls until `rank` is reported gone; a bounded wait for the kernel to deliver SIGKILL, not a
// timing check (fails only if the kernel never reports the exit).
bool wait_gone(ProcessWatch& watch, uint32_t rank) {
  for (int i = 0; i < 10000; ++i) {
    for (uint32_t gone : poll(watch)) {
      if (gone == rank) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// Kills `child`, which `watch` watches as `rank` through kill(pid, 0): its zombie still counts
// alive (its pid exists until the reap), and the reap makes it gone.
void check_gone_only_once_reaped(ProcessWatch& watch, uint32_t rank, pid_t child) {
  REQUIRE(kill(child, SIGKILL) == 0);
  siginfo_t info{};
  REQUIRE(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT) == 0);  // a zombie now
  CHECK(poll(watch).empty());
  REQUIRE(waitpid(child, nullptr, 0) == child);
  CHECK(poll(watch) == std::vector<uint32_t>{rank});
}

}  // namespace

TEST_CASE("a pidfd reports a killed process gone before it is reaped") {
  ProcessWatch watch(real_os());
  pid_t child = start_child();
  watch.watch(3, child);
  watch.watch(5, getpid());
  CHECK(poll(watch).empty());
  REQUIRE(kill(child, SIGKILL) == 0);
  if (watch.uses_pidfd()) {
    CHECK(wait_gone(watch, 3));
    CHECK_FALSE(watch.watching(3));
    CHECK(watch.watching(5));
  } else {
    MESSAGE("no pidfd here: the kill(pid, 0) fallback waits for the reap");
  }
  REQUIRE(waitpid(child, nullptr, 0) == child);
  if (!watch.uses_pidfd()) CHECK(wait_gone(watch, 3));
  CHECK(poll(watch).empty());
}

TEST_CASE("the kill(pid, 0) fallback counts a zombie alive until it is reaped") {
  ProcessWatch watch(real_os(), ProcessWatch::Method::kKillSignal);
  pid_t child = start_child();
  watch.watch(0, child);
  CHECK_FALSE(watch.uses_pidfd());
  check_gone_only_once_reaped(watch, 0, child);
}

TEST_CASE("a process gone before it is watched is reported at the next poll") {
  pid_t child = fork();
  if (child == 0) _exit(0);
  REQUIRE(waitpid(child, nullptr, 0) == child);
  ProcessWatch watch(real_os());
  watch.watch(2, child);
  CHECK(poll(watch) == std::vector<uint32_t>{2});
}

TEST_CASE("watching replaces and forgetting stops; bad pids are refused") {
  ProcessWatch watch(real_os());
  CHECK_THROWS_WITH_AS(watch.watch(1, 0), "rank 1: pid 0 is not a process id", Error);
  watch.watch(1, getpid());
  watch.watch(1, getppid());
  CHECK(watch.watching(1));
  watch.forget(1);
  watch.forget(1);
  CHECK_FALSE(watch.watching(1));
  ProcessWatch moved(std::move(watch));
  CHECK(poll(moved).empty());
}

TEST_CASE("a kernel without pidfds: the watch falls back to kill(pid, 0), late but never early") {
  for (int refusal : {ENOSYS, EPERM}) {  // an old kernel; a seccomp filter
    CAPTURE(refusal);
    test::FaultInjectionOs os(real_os());
    os.fail("pidfd_open", refusal);
    ProcessWatch watch(os);
    pid_t child = start_child();
    watch.watch(4, child);
    CHECK(os.calls("pidfd_open") == 1);
    CHECK_FALSE(watch.uses_pidfd());
    check_gone_only_once_reaped(watch, 4, child);
  }
}

TEST_CASE("pidfd_open saying ESRCH reports the rank gone at the next poll, without a signal") {
  test::FaultInjectionOs os(real_os());
  os.fail("pidfd_open", ESRCH);
  ProcessWatch watch(os);
  watch.watch(6, getpid());  // alive, but the kernel said it was gone: the watch believes the kernel
  CHECK(watch.uses_pidfd());
  CHECK(poll(watch) == std::vector<uint32_t>{6});
}

TEST_CASE("any other pidfd_open failure is an error naming the pid and changes nothing") {
  test::FaultInjectionOs os(real_os());
  ProcessWatch watch(os);
  watch.watch(2, getpid());
  os.fail("pidfd_open", EMFILE);
  const std::string names_the_pid = cat("pidfd_open of pid ", getppid(), " (rank 2)");
  CHECK_THROWS_WITH_AS(watch.watch(2, getppid()), doctest::Contains(names_the_pid.c_str()), Error);
  CHECK(watch.watching(2));
  CHECK(poll(watch).empty());
}

}  // namespace hugepin
