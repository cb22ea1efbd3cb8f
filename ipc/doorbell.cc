#include "ipc/doorbell.h"

#include <linux/membarrier.h>
#include <pthread.h>

#include <climits>
#include <ctime>
#include <mutex>

namespace hugepin {

namespace detail {

std::atomic<int> asymmetric_barrier_state{0};

int register_asymmetric_barrier(Os& os) {
  static std::once_flag fork_handler;
  // A child re-registers: whether the kernel carries the registration across fork is not
  // something to rely on.
  std::call_once(fork_handler, [] { pthread_atfork(nullptr, nullptr, forget_asymmetric_barrier); });
  const int state = os.membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0 ? 1 : -1;
  asymmetric_barrier_state.store(state, std::memory_order_relaxed);
  return state;
}

}  // namespace detail

void forget_asymmetric_barrier() { detail::asymmetric_barrier_state.store(0, std::memory_order_relaxed); }

bool Doorbell::heavy_barrier(Os& os) { return os.membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0; }

void Doorbell::mark_unfenced_waker() {
  if (unfenced_wakers.load(std::memory_order_relaxed) == 0) unfenced_wakers.store(1, std::memory_order_seq_cst);
}

void Doorbell::wake(Os& os) {
  word.fetch_add(1, std::memory_order_release);  // release: pairs with the acquire load in wait()
  os.futex_wake(&word, INT_MAX);
}

}  // namespace hugepin
