// Diagnostics on stderr, one line each, prefixed with the program's name.
//
// Thread-safe: each line is written with one write(2). `warn_once` remembers keys for the life of
// the process, so a fallback taken a million times is reported once.
#pragma once

#include <string_view>

namespace hugepin::log {

enum class Level { kQuiet = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

void set_level(Level level);
Level level();
// The prefix of every line, "hugepin" by default (the shim and the daemon set their own).
void set_program(std::string_view name);

// For a fork handler (pthread_atfork): holds the log's lock across fork, so that a child never
// starts with it held by a thread that does not exist there.
void lock_for_fork();
void unlock_after_fork();

void warn(std::string_view message);
void info(std::string_view message);
void debug(std::string_view message);
// Warns the first time `key` is seen in this process; later calls with the same key are silent.
void warn_once(std::string_view key, std::string_view message);

}  // namespace hugepin::log
