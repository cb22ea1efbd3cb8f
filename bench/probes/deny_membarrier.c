// deny_membarrier COMMAND [ARGS...]: runs COMMAND with membarrier(2) failing with ENOSYS, as a
// sandbox's seccomp filter or an old kernel answers it, to measure what the rings do there
// (docs/performance.md, "Development VM": the ring table's "refused" rows; since the eleventh
// session only the baseline ring uses membarrier). Not part of hugepin.
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: deny_membarrier COMMAND [ARGS...]\n");
    return 2;
  }
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog program = {sizeof filter / sizeof filter[0], filter};
  // No new privileges: what an unprivileged process needs to install a filter.
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    perror("deny_membarrier: seccomp");
    return 1;
  }
  execvp(argv[1], argv + 1);
  perror("deny_membarrier: exec");
  return 127;
}
