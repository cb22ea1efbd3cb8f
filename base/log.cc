#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <set>
#include <string>

#include "base/mutex.h"

namespace hugepin::log {
namespace {

// Constant-initialized: usable before any dynamic initializer runs.
std::atomic<Level> g_level{Level::kWarn};
constinit Mutex g_mutex;  // guards program() and warned()

// Built on first use and never destroyed. The LD_PRELOAD shim logs from inside CUDA calls, which
// a library's constructor can make before this library's initializers have run, and a library's
// destructor after its destructors would have: a global std::string or std::set would be used
// unconstructed or freed.
std::string& program() HUGEPIN_REQUIRES_LOCK(g_mutex) {
  static std::string* name = new std::string("hugepin");
  return *name;
}
std::set<std::string, std::less<>>& warned() HUGEPIN_REQUIRES_LOCK(g_mutex) {
  static auto* keys = new std::set<std::string, std::less<>>();
  return *keys;
}

void emit(std::string_view tag, std::string_view message) {
  std::string line;
  {
    MutexLock lock(g_mutex);
    line = program();
  }
  line.append(": ").append(tag).append(message).push_back('\n');
  // One write per line keeps lines from concurrent threads and processes whole.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace

void set_level(Level level) { g_level.store(level, std::memory_order_relaxed); }
Level level() { return g_level.load(std::memory_order_relaxed); }

void lock_for_fork() HUGEPIN_ACQUIRE(g_mutex) { g_mutex.lock(); }
void unlock_after_fork() HUGEPIN_RELEASE(g_mutex) { g_mutex.unlock(); }

void set_program(std::string_view name) {
  MutexLock lock(g_mutex);
  program() = name;
}

void warn(std::string_view message) {
  if (level() >= Level::kWarn) emit("warning: ", message);
}
void info(std::string_view message) {
  if (level() >= Level::kInfo) emit("", message);
}
void debug(std::string_view message) {
  if (level() >= Level::kDebug) emit("debug: ", message);
}

void warn_once(std::string_view key, std::string_view message) {
  {
    MutexLock lock(g_mutex);
    if (!warned().emplace(key).second) return;
  }
  warn(message);
}

}  // namespace hugepin::log
