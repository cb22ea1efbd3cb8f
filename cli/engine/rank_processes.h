// Worker processes, one per rank, each with its own channel to the parent: how `hugepin demo`
// and `hugepin bench offload` run a TP x PP engine in miniature (an engine has its own launcher).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hugepin::cli {

// How many GPUs the workers of `backend` use: "host" 0; "auto" as many as answer (0 with no GPU);
// "gpu" as many as answer, and Error when none does. The parent must not initialize CUDA before
// it forks workers, so a short-lived child counts them.
int gpus_for_backend(std::string_view backend);

class RankProcesses {
 public:
  // Runs in the child with the rank and its end of the channel; must end the process (_exit).
  using Body = std::function<void(uint32_t rank, int channel)>;

  RankProcesses(uint32_t ranks, Body body);
  // Kills (SIGKILL) and reaps every process still running, closes the channels.
  ~RankProcesses();
  RankProcesses(const RankProcesses&) = delete;
  RankProcesses& operator=(const RankProcesses&) = delete;

  // Starts rank `rank`'s process (again, after reap()): a SOCK_SEQPACKET socket pair, fork.
  void spawn(uint32_t rank);
  uint32_t ranks() const { return static_cast<uint32_t>(processes_.size()); }
  pid_t pid(uint32_t rank) const { return processes_.at(rank).pid; }
  int channel(uint32_t rank) const { return processes_.at(rank).channel; }
  // The wait status of `rank`'s process when it has ended (and reaps it); nullopt while it runs.
  std::optional<int> reap(uint32_t rank);
  void kill(uint32_t rank);
  // Waits for every running process; throws Error naming the first that did not exit 0.
  void wait_all();

  // "killed by signal 9", "exited with status 1".
  static std::string describe(int status);

 private:
  struct Process {
    pid_t pid = -1;
    int channel = -1;
  };
  Body body_;
  std::vector<Process> processes_;
};

}  // namespace hugepin::cli
