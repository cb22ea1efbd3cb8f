// A mutex the thread-safety analysis knows (base/thread_annotations.h): std::mutex under a
// capability, and a scoped lock for it. libstdc++'s std::mutex and std::lock_guard carry no
// annotations, so clang cannot see which locks a function holds through them.
//
// Thread-safety: as std::mutex. Constant-initialized (constinit works): usable before any
// dynamic initializer runs, as the LD_PRELOAD shim needs.
#pragma once

#include <mutex>

#include "base/thread_annotations.h"

namespace hugepin {

class HUGEPIN_CAPABILITY("mutex") Mutex {
 public:
  constexpr Mutex() noexcept = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() HUGEPIN_ACQUIRE() { mutex_.lock(); }
  void unlock() HUGEPIN_RELEASE() { mutex_.unlock(); }

 private:
  std::mutex mutex_;
};

// Holds a Mutex from construction to destruction.
class HUGEPIN_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mutex) HUGEPIN_ACQUIRE(mutex) : mutex_(mutex) { mutex_.lock(); }
  ~MutexLock() HUGEPIN_RELEASE() { mutex_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mutex_;
};

}  // namespace hugepin
