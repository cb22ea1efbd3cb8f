#include "tests/support/child_process.h"

#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <exception>

#include "base/error.h"

namespace hugepin::test {

int run_in_child(const std::function<bool()>& body) {
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) throw_errno("fork", errno);
  if (pid == 0) {
    int code = 2;
    try {
      code = body() ? 0 : 1;
    } catch (const std::exception& error) {
      std::fprintf(stderr, "child: %s\n", error.what());
    }
    std::fflush(nullptr);
    _exit(code);
  }
  int status = 0;
  pid_t waited = 0;
  do {
    waited = waitpid(pid, &status, 0);
  } while (waited < 0 && errno == EINTR);
  if (waited != pid) throw_errno("waitpid", errno);
  return WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status);
}

int run_as_nobody(gid_t gid, const std::vector<gid_t>& groups, const std::function<bool()>& body) {
  return run_in_child([&] {
    if (setgroups(groups.size(), groups.data()) != 0 || setgid(gid) != 0 || setuid(kNobodyUid) != 0) {
      throw_errno("cannot become uid 65534", errno);
    }
    return body();
  });
}

}  // namespace hugepin::test
