#include "ipc/report_gate.h"

#include "base/contract.h"

namespace hugepin {

void ReportGate::count(Os& os, uint32_t gated_count, uint32_t urgent_count) {
  // seq_cst read-modify-writes: the producer's half of the Dekker pair (see the file comment).
  // Each also releases the records published before it to a sleeper that reads the count.
  const uint64_t now_posted = posted.fetch_add(gated_count, std::memory_order_seq_cst) + gated_count;
  if (urgent_count > 0) urgent.fetch_add(urgent_count, std::memory_order_seq_cst);
  // `sleepers` before `wake_at`: a sleeper stores its target before it counts itself.
  if (sleepers.load(std::memory_order_seq_cst) == 0) return;
  if (urgent_count == 0 && now_posted < wake_at.load(std::memory_order_seq_cst)) return;
  word.fetch_add(1, std::memory_order_release);  // release: pairs with the acquire load in wait()
  os.futex_wake(&word, 1);
}

GateMark ReportGate::mark() const {
  // seq_cst (also acquire): pairs with the counts, so what they count is visible on the rings.
  return {posted.load(std::memory_order_seq_cst), urgent.load(std::memory_order_seq_cst)};
}

bool ReportGate::wait(Os& os, const GateMark& since, uint64_t gated, int64_t timeout_ns) {
  HUGEPIN_REQUIRE(gated >= 1, "a wait for ", gated, " reports");
  const uint64_t target = since.posted + gated;
  auto met = [&] {
    return posted.load(std::memory_order_seq_cst) >= target || urgent.load(std::memory_order_seq_cst) != since.urgent;
  };
  if (met()) return true;
  const int64_t deadline = deadline_after(os, timeout_ns);
  wake_at.store(target, std::memory_order_seq_cst);
  for (;;) {
    // Acquire pairs with the release bump of `word` in count().
    const uint32_t seen = word.load(std::memory_order_acquire);
    sleepers.fetch_add(1, std::memory_order_seq_cst);  // the sleeper's half of the Dekker pair
    if (met()) {
      sleepers.fetch_sub(1, std::memory_order_relaxed);
      return true;
    }
    const int64_t remaining = time_left(os, deadline);
    if (remaining == 0) {
      sleepers.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    os.futex_wait(&word, seen, remaining);  // woken, spurious, EAGAIN, EINTR, timed out: re-check
    sleepers.fetch_sub(1, std::memory_order_relaxed);
  }
}

}  // namespace hugepin
