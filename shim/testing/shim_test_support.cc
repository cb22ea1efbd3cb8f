#include "shim/testing/shim_test_support.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

#include "base/error.h"
#include "hugemem/arena.h"

namespace hugepin::test {

int ShimRun::warnings() const {
  int count = 0;
  size_t at = 0;
  while ((at = out.find("]: warning: ", at)) != std::string::npos) {
    ++count;
    ++at;
  }
  return count;
}

ShimEnvironment::ShimEnvironment() : shm_("/dev/shm") {}

std::string ShimEnvironment::command(const std::string& variables, const std::string& program) const {
  return cat("env LD_PRELOAD=", HUGEPIN_PRELOAD_PATH, " HUGEPIN_MIN_BYTES=1M HUGEPIN_SHM_DIR=", shm_.path(),
             " HUGEPIN_SYSROOT=", test_data_path("sysfs/two-node"), " FAKE_CUDA_PCI_BUS_ID=0000:00:02.0",
             " PROBE_SHM_DIR=", shm_.path(), " ", variables, " ", program);
}

ShimRun ShimEnvironment::run(const std::string& variables, const std::string& program) const {
  CommandResult result = run_command(command(variables, program));
  return ShimRun{result.status, result.out};
}

void create_shm_arena(const std::string& shm_dir, const std::string& name, uint32_t rank, uint64_t bytes) {
  ArenaOptions options;
  options.page_size = 4096;
  options.shm_dir = shm_dir;
  options.prefault_threads = 1;
  create_arena(real_os(), name, {{rank, bytes, -1}}, options);
}

HeldProcess::HeldProcess(const std::string& command_line) {
  int to_child[2];
  int from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) throw std::runtime_error("pipe failed");
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    dup2(to_child[0], STDIN_FILENO);
    dup2(from_child[1], STDOUT_FILENO);
    dup2(from_child[1], STDERR_FILENO);
    close(to_child[0]);
    close(to_child[1]);
    close(from_child[0]);
    close(from_child[1]);
    std::string exec_line = "exec " + command_line;  // the program keeps this pid
    execl("/bin/sh", "sh", "-c", exec_line.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  stdin_fd_ = to_child[1];
  stdout_ = fdopen(from_child[0], "r");
}

std::string HeldProcess::read_line() {
  char buffer[4096];
  if (stdout_ == nullptr || std::fgets(buffer, sizeof buffer, stdout_) == nullptr) return "";
  std::string line = buffer;
  if (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

int HeldProcess::finish() {
  if (pid_ < 0) return -1;
  if (stdin_fd_ >= 0) close(stdin_fd_);
  stdin_fd_ = -1;
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  if (stdout_ != nullptr) std::fclose(stdout_);
  stdout_ = nullptr;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

HeldProcess::~HeldProcess() {
  if (pid_ > 0) finish();
}

std::string probe13() { return SHIM_PROBE13_PATH; }
std::string probe12() { return SHIM_PROBE12_PATH; }
std::string preload_path() { return HUGEPIN_PRELOAD_PATH; }

}  // namespace hugepin::test
