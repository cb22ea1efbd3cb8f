// What the shim's process tests share: running programs under the shim with a chosen
// environment, arenas on 4 KiB shared memory in a private directory, and a process that holds
// shim allocations while a test looks at it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "base/error.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace hugepin::test {

// The output of a program run under the shim.
struct ShimRun {
  int status = -1;
  std::string out;  // stdout and stderr together

  // Lines of stderr the shim wrote as warnings ("hugepin-shim[pid]: warning: ...").
  int warnings() const;
  bool says(const std::string& text) const { return out.find(text) != std::string::npos; }
};

// "exit <status>, output:" and the output: what a failed check on a run prints.
inline std::string describe(const ShimRun& run) { return cat("exit ", run.status, ", output:\n", run.out); }

// A private shared-memory directory for one test (arena regions, allocation tables), and the
// environment a program needs to run under the shim against the fake CUDA libraries:
// LD_PRELOAD, HUGEPIN_MIN_BYTES=1M, HUGEPIN_SHM_DIR, HUGEPIN_SYSROOT (the recorded two-node tree),
// a fake GPU with no NUMA affinity, and the probe's PROBE_* variables.
class ShimEnvironment {
 public:
  ShimEnvironment();

  const std::string& shm_dir() const { return shm_.path(); }
  // `variables` ("A=1 B=2") come after the defaults and so override them.
  std::string command(const std::string& variables, const std::string& program) const;
  ShimRun run(const std::string& variables, const std::string& program) const;

 private:
  TempDir shm_;
};

// Creates arena `name` with one region of `bytes` on 4 KiB shared memory in `shm_dir` for
// `rank`; the caller's TempDir removes it.
void create_shm_arena(const std::string& shm_dir, const std::string& name, uint32_t rank, uint64_t bytes);

// A program started with a pipe on its stdin: it runs until the pipe closes.
class HeldProcess {
 public:
  explicit HeldProcess(const std::string& command_line);
  ~HeldProcess();
  HeldProcess(const HeldProcess&) = delete;
  HeldProcess& operator=(const HeldProcess&) = delete;

  // The next line it printed (without the newline), or "" at end of output.
  std::string read_line();
  // Closes its stdin and waits; returns its exit status (-1 when killed by a signal).
  int finish();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  FILE* stdout_ = nullptr;
};

std::string probe13();
std::string probe12();
std::string preload_path();

}  // namespace hugepin::test
