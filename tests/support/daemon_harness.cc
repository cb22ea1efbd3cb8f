#include "tests/support/daemon_harness.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "base/os.h"
#include "daemon/client.h"
#include "daemon/quarantine.h"
#include "ipc/control_segment.h"

extern char** environ;

namespace hugepin::test {
namespace {

std::string unique_tag(const std::string& tag) {
  static std::atomic<int> counter{0};
  return cat("t", getpid(), "-", tag, counter++, "-");
}

}  // namespace

NotifyListener::NotifyListener(std::string address) : address_(std::move(address)) {
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd_ >= 0);
  sockaddr_un target{};
  target.sun_family = AF_UNIX;
  REQUIRE(address_.size() < sizeof target.sun_path);
  std::memcpy(target.sun_path, address_.data(), address_.size());
  const bool abstract = address_[0] == '@';
  if (abstract) target.sun_path[0] = '\0';
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address_.size() + (abstract ? 0 : 1));
  REQUIRE(::bind(fd_, reinterpret_cast<const sockaddr*>(&target), length) == 0);
  reader_ = std::thread([this] { read_messages(); });
}

NotifyListener::~NotifyListener() {
  stopping_ = true;
  reader_.join();
  ::close(fd_);
}

void NotifyListener::read_messages() {
  char buffer[4096];
  while (!stopping_) {
    pollfd entry{fd_, POLLIN, 0};
    // The timeout only bounds how long the destructor waits for this thread to see stopping_.
    if (::poll(&entry, 1, 20) <= 0) continue;
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n <= 0) continue;
    {
      std::lock_guard lock(mutex_);
      messages_.emplace_back(buffer, static_cast<size_t>(n));
    }
    arrived_.notify_all();
  }
}

bool NotifyListener::receive(int timeout_ms) {
  std::unique_lock lock(mutex_);
  const size_t seen = messages_.size();
  return arrived_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return messages_.size() > seen; });
}

bool NotifyListener::wait_for(std::string_view needle, int timeout_ms) {
  std::unique_lock lock(mutex_);
  return arrived_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return count_locked(needle) > 0; });
}

std::vector<std::string> NotifyListener::messages() const {
  std::lock_guard lock(mutex_);
  return messages_;
}

size_t NotifyListener::count(std::string_view needle) const {
  std::lock_guard lock(mutex_);
  return count_locked(needle);
}

size_t NotifyListener::count_locked(std::string_view needle) const {
  size_t n = 0;
  for (const std::string& message : messages_) {
    if (message.find(needle) != std::string::npos) ++n;
  }
  return n;
}

TestDaemon::TestDaemon(const std::string& tag, bool abstract_notify)
    : dir_("/dev/shm"),
      prefix_(unique_tag(tag)),
      socket_(dir_.path() + "/hugepind.sock"),
      notify_(abstract_notify ? cat("@", prefix_, "notify") : dir_.path() + "/notify") {
  // Other users' test clients must reach the socket (the daemon decides who is refused).
  ::chmod(dir_.path().c_str(), 0755);
  env_ = {{"HUGEPIN_CONFIG", config_path()},
          {"HUGEPIN_SOCKET", socket_},
          {"HUGEPIN_SHM_DIR", dir_.path()},
          {"HUGEPIN_ARENA_PREFIX", prefix_},
          {"HUGEPIN_GROUP", "root"},
          {"HUGEPIN_REAP_INTERVAL", "100ms"},
          {"HUGEPIN_STALE_GRACE", "0"},
          {"HUGEPIN_REQUEST_TIMEOUT", "5s"},
          {"HUGEPIN_METRICS_DIR", dir_.path()},
          {"HUGEPIN_METRICS_INTERVAL", "200ms"},
          {"NOTIFY_SOCKET", notify_.address()}};
  write_config("");
}

TestDaemon::~TestDaemon() {
  if (running()) stop(SIGKILL);
  std::vector<std::string> files;
  if (real_os().list_data_dir(std::string(kControlSegmentDir), &files) == 0) {
    for (const std::string& file : files) {
      const std::string arena = arena_of_segment_file(file);
      if (!arena.empty() && arena.compare(0, prefix_.size(), prefix_) == 0) remove_control_segment(real_os(), arena);
    }
  }
  for (const daemon::QuarantineEntry& entry : daemon::list_quarantine(real_os(), prefix_)) {
    std::error_code ignored;
    std::filesystem::remove_all(entry.path, ignored);
  }
}

void TestDaemon::write_config(const std::string& text) { std::ofstream(config_path()) << text; }

void TestDaemon::spawn(const std::vector<std::string>& args) {
  REQUIRE_FALSE(running());
  // HUGEPIN_TEST_HUGEPIND runs another build's hugepind (a sanitized one) under the same tests.
  const char* other = std::getenv("HUGEPIN_TEST_HUGEPIND");
  std::vector<std::string> strings{other != nullptr && *other != '\0' ? other : HUGEPIN_DAEMON_PATH};
  strings.insert(strings.end(), args.begin(), args.end());
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string_view variable(*entry);
    if (variable.substr(0, 8) == "HUGEPIN_" || variable.substr(0, 14) == "NOTIFY_SOCKET=" ||
        variable.substr(0, 9) == "WATCHDOG_" || variable.substr(0, 18) == "RUNTIME_DIRECTORY=") {
      continue;
    }
    environment.emplace_back(variable);
  }
  for (const auto& [variable, value] : env_) environment.push_back(variable + "=" + value);
  std::vector<char*> argv;
  for (std::string& s : strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& s : environment) envp.push_back(s.data());
  envp.push_back(nullptr);
  const std::string log_path = dir() + "/hugepind.log";
  std::fflush(nullptr);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (log >= 0) {
      dup2(log, STDOUT_FILENO);
      dup2(log, STDERR_FILENO);
    }
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  pid_ = pid;
}

void TestDaemon::start(const std::vector<std::string>& args) {
  const size_t ready_before = notify_.count("READY=1");
  spawn(args);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (notify_.count("READY=1") == ready_before) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = 0;
      FAIL("hugepind exited before READY=1 (status ", status, "):\n", log());
    }
    if (std::chrono::steady_clock::now() > deadline) FAIL("hugepind sent no READY=1 in 30 s:\n", log());
    notify_.receive(100);
  }
}

int TestDaemon::stop(int signal) {
  REQUIRE(running());
  ::kill(pid_, signal);
  return wait();
}

int TestDaemon::wait() {
  int status = 0;
  REQUIRE(waitpid(pid_, &status, 0) == pid_);
  pid_ = 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

std::string TestDaemon::log() const {
  std::ifstream in(dir() + "/hugepind.log");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

ArenaOptions TestDaemon::where() const {
  ArenaOptions options;
  options.page_size = 4096;
  options.shm_dir = dir();
  options.prefault_threads = 1;
  return options;
}

daemon::Json TestDaemon::request(const daemon::Json& request) {
  daemon::DaemonClient client = daemon::DaemonClient::connect(real_os(), socket_);
  return client.request(request, 60'000'000'000);
}

daemon::Json TestDaemon::ask(std::string_view op) {
  return request(daemon::Json{{"version", daemon::kProtocolVersion}, {"op", op}});
}

daemon::Json TestDaemon::create(const std::string& tag, uint64_t bytes, uint32_t ranks) {
  return request(daemon::Json{{"version", daemon::kProtocolVersion},
                              {"op", "create"},
                              {"name", arena(tag)},
                              {"size", bytes},
                              {"ranks", ranks},
                              {"chunk", 64 * 1024},
                              {"pagesize", "4K"}});
}

bool TestDaemon::wait_until(const std::function<bool()>& done, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace hugepin::test
