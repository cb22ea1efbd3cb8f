// Work split over threads that live for one call: prefaulting a region, pinning it, copying
// blocks, touching pages. Not a pool: nothing is queued, nothing outlives the call.
#pragma once

#include <cstdint>
#include <functional>

namespace hugepin {

// Calls work(0), ..., work(count - 1), each on a thread of its own, and returns once every call
// has returned. `on_new_thread`, when given, runs first on each thread started here (CPU
// placement, for one). A call whose thread cannot start (EAGAIN: a pid or memory limit) runs on
// the calling thread once the others have started, without `on_new_thread`: fewer threads, the
// same work, and never a joinable thread left behind. When calls throw (`on_new_thread`
// included), every call still runs to its end and the exception of the lowest index is rethrown
// here; the others are dropped. count 0: nothing runs.
void run_on_threads(unsigned count, const std::function<void(unsigned index)>& work,
                    const std::function<void()>& on_new_thread = {});

// Names the calling thread, as ps, top and /proc/PID/task/TID/comm show it (the first 15
// characters), so that a thread of the library's can be told from the engine's own. Best
// effort: nothing happens where the name cannot be set.
void name_this_thread(const char* name);

// Items [first, last) of a larger whole.
struct Share {
  uint64_t first = 0;
  uint64_t last = 0;
};

// Share `index` of `total` items cut into `count` shares that differ by at most one item, in
// order. REQUIRES: index < count.
Share share_of(uint64_t total, unsigned index, unsigned count);

}  // namespace hugepin
