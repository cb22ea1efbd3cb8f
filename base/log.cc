#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>

namespace hugepin::log {
namespace {

std::atomic<Level> g_level{Level::kWarn};
std::mutex g_mutex;  // guards g_program and g_warned
std::string g_program = "hugepin";
std::set<std::string, std::less<>> g_warned;

void emit(std::string_view tag, std::string_view message) {
  std::string line;
  {
    std::lock_guard lock(g_mutex);
    line = g_program;
  }
  line.append(": ").append(tag).append(message).push_back('\n');
  // One write per line keeps lines from concurrent threads and processes whole.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace

void set_level(Level level) { g_level.store(level, std::memory_order_relaxed); }
Level level() { return g_level.load(std::memory_order_relaxed); }

void set_program(std::string_view name) {
  std::lock_guard lock(g_mutex);
  g_program = name;
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
    std::lock_guard lock(g_mutex);
    if (!g_warned.emplace(key).second) return;
  }
  warn(message);
}

}  // namespace hugepin::log
