#include "ipc/doorbell.h"

#include <climits>
#include <ctime>

namespace hugepin {

int64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

void Doorbell::ring(Os& os) {
  // seq_cst: pairs with the seq_cst increment of `sleepers` in wait() (see the header).
  if (sleepers.load(std::memory_order_seq_cst) == 0) return;
  word.fetch_add(1, std::memory_order_release);  // release: pairs with the acquire load in wait()
  os.futex_wake(&word, INT_MAX);
}

}  // namespace hugepin
