// Claims and destroys of an arena, kept apart by a lock on its control segment file (flock).
//
// A claim (a worker taking its rank, a process taking the scheduler role) holds the lock shared
// for the moment of the claim. A destroy that must not race a claim (hugepind's retention) holds
// it exclusive while it checks that nobody owns the arena and removes it. So either the claim
// lands first and the destroy sees the owner and leaves the arena alone, or the destroy runs
// first and the claim, which waited, finds the segment unlinked and fails: it never attaches to
// an arena that no longer exists by name.
//
// Both are move-only; dropping one releases its lock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/os.h"
#include "base/unique_fd.h"
#include "ipc/control_segment.h"

namespace hugepin {

class ArenaClaimLock {
 public:
  static constexpr int64_t kDefaultTimeoutNs = 10'000'000'000;

  // Takes the lock shared on `segment`'s own descriptor, waiting out a destroy in progress for at
  // most `timeout_ns`. Throws Error(ENOENT) when the arena was destroyed meanwhile (the segment is
  // unlinked), Error(EBUSY) naming the segment when an exclusive holder outlasts the timeout, and
  // Error on a failed flock or fstat. Claims on descriptors of one open file description share
  // one lock: releasing either releases it (flock follows the description, also across fork).
  static ArenaClaimLock take(Os& os, const ControlSegment& segment, std::string_view arena,
                             int64_t timeout_ns = kDefaultTimeoutNs);

  ArenaClaimLock() = default;
  ~ArenaClaimLock();
  ArenaClaimLock(ArenaClaimLock&& other) noexcept;
  ArenaClaimLock& operator=(ArenaClaimLock&& other) noexcept;
  ArenaClaimLock(const ArenaClaimLock&) = delete;
  ArenaClaimLock& operator=(const ArenaClaimLock&) = delete;

 private:
  void release() noexcept;

  Os* os_ = nullptr;
  int fd_ = -1;  // the segment's descriptor: borrowed, unlocked on release, never closed here
};

class ArenaDestroyLock {
 public:
  // Opens arena `arena`'s control segment and takes the lock exclusive without waiting. Returns
  // nullopt when a claim holds it now or the segment is gone (also when it was unlinked between
  // the open and the lock); throws Error on other failures.
  static std::optional<ArenaDestroyLock> try_take(Os& os, std::string_view arena);

 private:
  UniqueFd fd_;  // closing it drops the lock
};

}  // namespace hugepin
