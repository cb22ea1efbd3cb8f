#include "cli/engine/rank_processes.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iostream>

#include "base/error.h"
#include "dma/copy_engine.h"
#include "dma/gpu_runtime.h"

namespace hugepin::cli {

int gpus_for_backend(std::string_view backend) {
  if (backend == "host") return 0;
  const pid_t child = fork();
  if (child < 0) throw_errno("fork", errno);
  if (child == 0) {
    int count = 0;
    if (!cuda_available() || cuda_runtime()->device_count(&count) != 0) count = 0;
    _exit(std::min(count, 64));
  }
  int status = 0;
  waitpid(child, &status, 0);
  const int gpus = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  if (gpus == 0 && backend == "gpu") throw Error("--backend gpu: no CUDA device is available (use --backend host)");
  return gpus;
}

RankProcesses::RankProcesses(uint32_t ranks, Body body) : body_(std::move(body)), processes_(ranks) {}

RankProcesses::~RankProcesses() {
  for (Process& process : processes_) {
    if (process.pid > 0) {
      ::kill(process.pid, SIGKILL);
      waitpid(process.pid, nullptr, 0);
    }
    if (process.channel >= 0) close(process.channel);
  }
}

void RankProcesses::spawn(uint32_t rank) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) throw_errno("socketpair", errno);
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = fork();
  if (pid < 0) throw_errno("fork", errno);
  if (pid == 0) {
    close(fds[0]);
    for (const Process& other : processes_) {
      if (other.channel >= 0) close(other.channel);
    }
    body_(rank, fds[1]);
    _exit(1);  // the body must not return
  }
  close(fds[1]);
  Process& process = processes_.at(rank);
  if (process.channel >= 0) close(process.channel);
  process = {pid, fds[0]};
}

std::optional<int> RankProcesses::reap(uint32_t rank) {
  Process& process = processes_.at(rank);
  int status = 0;
  if (process.pid <= 0 || waitpid(process.pid, &status, WNOHANG) != process.pid) return std::nullopt;
  process.pid = -1;
  return status;
}

void RankProcesses::kill(uint32_t rank) {
  if (processes_.at(rank).pid > 0) ::kill(processes_[rank].pid, SIGKILL);
}

void RankProcesses::wait_all() {
  for (uint32_t rank = 0; rank < processes_.size(); ++rank) {
    Process& process = processes_[rank];
    if (process.pid <= 0) continue;
    int status = 0;
    waitpid(process.pid, &status, 0);
    process.pid = -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      throw Error(cat("rank ", rank, "'s worker ", describe(status), " (see its message above)"));
    }
  }
}

std::string RankProcesses::describe(int status) {
  return WIFSIGNALED(status) ? cat("killed by signal ", WTERMSIG(status)) : cat("exited with status ", WEXITSTATUS(status));
}

}  // namespace hugepin::cli
