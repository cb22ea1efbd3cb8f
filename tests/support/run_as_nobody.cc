#include "tests/support/run_as_nobody.h"

#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>

namespace hugepin::test {

int run_as_nobody(gid_t gid, const std::vector<gid_t>& groups, const std::function<bool()>& body) {
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int code = 3;
    if (setgroups(groups.size(), groups.data()) == 0 && setgid(gid) == 0 && setuid(kNobodyUid) == 0) {
      try {
        code = body() ? 0 : 1;
      } catch (const std::exception& error) {
        std::fprintf(stderr, "child (uid 65534): %s\n", error.what());
        code = 2;
      }
    }
    std::fflush(nullptr);
    _exit(code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace hugepin::test
