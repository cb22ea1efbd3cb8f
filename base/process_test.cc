#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/process.h"

namespace hugepin {

TEST_CASE("parse_proc_stat reads the state and field 22 past any command name") {
  std::string fields = " S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 19 20\n";
  auto stat = parse_proc_stat("123 (a) b) (c)" + fields);
  REQUIRE(stat);
  CHECK(stat->state == 'S');
  CHECK(stat->start_ticks == 424242);
  CHECK_FALSE(parse_proc_stat("123 (cut"));
  CHECK_FALSE(parse_proc_stat("123 (x) S 1 2 3"));
  CHECK_FALSE(parse_proc_stat("123 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 notanumber 19"));
}

TEST_CASE("a process is alive until it exits; a zombie and a reused pid are not") {
  ProcessIdentity self = self_identity(real_os());
  CHECK(self.pid == getpid());
  CHECK(self.start_ticks > 0);
  CHECK(is_process_alive(real_os(), self.pid, self.start_ticks));
  CHECK_FALSE(is_process_alive(real_os(), self.pid, self.start_ticks + 1));  // another process with our pid
  CHECK(is_process_alive(real_os(), self.pid, self.start_ticks + (uint64_t{1} << 32), 0xffffffff));
  CHECK_FALSE(is_process_alive(real_os(), 0, 0));

  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  auto identity = read_process_identity(real_os(), child);
  REQUIRE(identity);
  CHECK(is_process_alive(real_os(), child, identity->start_ticks));
  REQUIRE(kill(child, SIGKILL) == 0);
  // Until it is reaped the child is a zombie: exited, so not alive.
  siginfo_t info{};
  REQUIRE(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT) == 0);
  CHECK_FALSE(is_process_alive(real_os(), child, identity->start_ticks));
  CHECK_FALSE(read_process_identity(real_os(), child));
  REQUIRE(waitpid(child, nullptr, 0) == child);
  CHECK_FALSE(is_process_alive(real_os(), child, identity->start_ticks));
}

}  // namespace hugepin
