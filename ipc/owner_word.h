// One 64-bit word that names a process in shared memory: the pid in the low 32 bits and the low
// 32 bits of its start time (clock ticks after boot) in the high 32 bits. One word, so that a
// compare-and-swap claims a role (a rank, the scheduler) atomically, and a reused pid does not
// pass for the process that died (it would have to start on the same tick, 2^32 ticks later).
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "base/os.h"
#include "base/process.h"

namespace hugepin {

inline constexpr uint64_t kNoOwner = 0;

inline uint64_t owner_word(const ProcessIdentity& identity) {
  return (identity.start_ticks << 32) | static_cast<uint32_t>(identity.pid);
}

inline pid_t owner_pid(uint64_t word) { return static_cast<pid_t>(static_cast<uint32_t>(word)); }

// True while the process the word names runs (false for kNoOwner).
inline bool owner_alive(Os& os, uint64_t word) {
  return word != kNoOwner && is_process_alive(os, owner_pid(word), word >> 32, 0xffffffff);
}

}  // namespace hugepin
