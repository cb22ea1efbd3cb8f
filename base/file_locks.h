// Which files hold a lock now, read from /proc/locks rather than probed.
//
// Probing a file with flock(LOCK_SH | LOCK_NB) answers the same question, but for its moment the
// probe is itself a lock that a process trying LOCK_EX | LOCK_NB then (the shim, opening its
// region) is refused by: that allocation would fall through to CUDA. Reading /proc/locks takes no
// lock, so it comes first.
#pragma once

#include <sys/types.h>

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "base/os.h"

namespace hugepin {

// (device, inode) of a file, as stat() gives them.
using FileKey = std::pair<dev_t, ino_t>;

// The files that hold a granted lock (flock, POSIX or OFD; waiters are not holders) in the text
// of /proc/locks. Lines it cannot read are skipped.
std::set<FileKey> parse_locked_files(std::string_view proc_locks);

// parse_locked_files of this machine's /proc/locks; nullopt when it cannot be read.
std::optional<std::set<FileKey>> locked_files(Os& os);

// True when some process (this one included) holds a lock on the file at `path`. /proc/locks
// first; where it does not list the file (or cannot be read), a probe (flock LOCK_SH | LOCK_NB on
// a descriptor of its own), since /proc/locks hides the locks of processes in PID namespaces the
// reader cannot see. The shim tries its own lock again for a few milliseconds, so a probe at the
// moment it opens its region costs it nothing. False when the file cannot be opened or stat'ed.
bool file_is_locked(Os& os, const std::string& path);

}  // namespace hugepin
