// Who a process is, across pid reuse: its pid and its start time.
//
// A pid alone is not an identity: the kernel hands a freed pid to the next process. The start
// time (clock ticks after boot, field 22 of /proc/<pid>/stat) is fixed for the life of a process,
// so (pid, start time) names one process for as long as the machine runs.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string_view>

#include "base/os.h"

namespace hugepin {

struct ProcessIdentity {
  pid_t pid = 0;
  uint64_t start_ticks = 0;  // clock ticks after boot when the process started
};

struct ProcStat {
  char state = '?';  // R, S, D, Z (zombie: exited, not yet reaped), X (dead), ...
  uint64_t start_ticks = 0;
};

// Parses the text of /proc/<pid>/stat (the command name may hold spaces and parentheses).
// Returns nullopt when the text is malformed.
std::optional<ProcStat> parse_proc_stat(std::string_view text);

// Process `pid` as it is now: nullopt when there is no such process, or it has exited (a zombie
// counts as exited), or /proc cannot tell (read through `os`, so under its system root).
std::optional<ProcessIdentity> read_process_identity(Os& os, pid_t pid);

// The calling process. Throws Error when /proc/self/stat cannot be read.
ProcessIdentity self_identity(Os& os);

// True while the process that `pid` and `start_ticks` named runs: the pid exists, is not a
// zombie, and started when recorded. `start_ticks_mask` compares only those bits of the start
// time (a record that kept the low 32 bits passes 0xffffffff). When /proc cannot be read for a
// pid that kill(pid, 0) finds (another user's process under hidepid), the pid alone decides.
bool is_process_alive(Os& os, pid_t pid, uint64_t start_ticks, uint64_t start_ticks_mask = ~uint64_t{0});

}  // namespace hugepin
