// Whether a process holds a file locked, asked without taking a lock.
//
// A process that maps a region for its own use (the shim) holds an open-file-description record
// lock (F_OFD_SETLK, F_WRLCK, whole file) on it for as long as it maps it. Others ask with
// F_OFD_GETLK, which places no lock (a probe with flock(LOCK_SH | LOCK_NB) would, and a process
// taking its own lock at that moment would be refused) and sees holders in every PID namespace
// (/proc/locks hides those it cannot see).
#pragma once

#include <cstdint>
#include <string>

#include "base/os.h"

namespace hugepin {

// Takes the whole-file write lock on `fd` (opened for writing) without waiting. Returns 0, or
// -EAGAIN / -EACCES when another open file description holds a lock on it, or another -errno.
int lock_file_for_use(Os& os, int fd);

// True when some open file description (this process's included) holds a lock on the file at
// `path` that a whole-file read lock would conflict with. False when no file is there or it is not
// one a process could map (a link, a socket, a FIFO: base/trusted_file.h refuses them without
// opening them). When the file cannot be asked (no permission, no descriptors), true: callers treat
// a file they cannot see into as in use rather than destroy it.
bool file_is_locked(Os& os, const std::string& path);

// Takes flock(LOCK_SH) on `fd`, waiting at most `timeout_ns` for an exclusive holder (polling, so
// a stuck holder cannot hang the caller), then checks that the file is still linked. Returns 0
// with the lock held; -EBUSY when the exclusive holder kept it past the timeout; -ENOENT when the
// file was unlinked meanwhile (the lock is then dropped again); another -errno.
int lock_shared_while_linked(Os& os, int fd, int64_t timeout_ns);

}  // namespace hugepin
