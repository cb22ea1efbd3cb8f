// Breaks a lock rule on purpose: shim/thread_safety_check.sh expects clang's thread-safety
// analysis to refuse this file before it trusts the analysis to pass the shim's sources (a clang
// that ignored the attributes would pass anything). Never built.
#include <cstdint>

#include "base/mutex.h"

namespace hugepin {

class Counter {
 public:
  void add() { ++value_; }  // written without mutex_: -Wthread-safety-analysis

 private:
  Mutex mutex_;
  uint64_t value_ HUGEPIN_GUARDED_BY(mutex_) = 0;
};

}  // namespace hugepin
