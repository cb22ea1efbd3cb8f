#include "ipc/report_gate.h"

#include <cerrno>

#include "base/contract.h"

namespace hugepin {

namespace {

constexpr uint64_t kTallyCountBits = 16;
constexpr uint64_t kTallyCountMask = (uint64_t{1} << kTallyCountBits) - 1;
constexpr uint64_t kNoTarget = ~uint64_t{0};

uint64_t tally_tag(uint64_t job) { return job << kTallyCountBits; }  // the id's low 48 bits

}  // namespace

void ReportGate::count(Os& os, uint32_t gated_count, uint32_t urgent_count, uint32_t release_count) {
  // seq_cst read-modify-writes: the producer's half of the Dekker pair (see the file comment).
  // Each also releases the records published before it to a sleeper that reads the count.
  const uint64_t now_posted = posted.fetch_add(gated_count, std::memory_order_seq_cst) + gated_count;
  const uint64_t now_released =
      release_count > 0 ? releases.fetch_add(release_count, std::memory_order_seq_cst) + release_count : 0;
  if (urgent_count > 0) urgent.fetch_add(urgent_count, std::memory_order_seq_cst);
  // `sleepers` before the targets: a sleeper stores its targets before it counts itself.
  if (sleepers.load(std::memory_order_seq_cst) == 0) return;
  const bool due = urgent_count > 0 || now_posted >= wake_at.load(std::memory_order_seq_cst) ||
                   (release_count > 0 && now_released >= release_wake_at.load(std::memory_order_seq_cst));
  if (!due) return;
  word.fetch_add(1, std::memory_order_release);  // release: pairs with the acquire load in wait()
  os.futex_wake(&word, 1);
}

void ReportGate::open_tally(uint64_t job, uint32_t reports) {
  HUGEPIN_REQUIRE(reports >= 1 && reports <= kTallyCountMask, "a tally of ", reports, " reports");
  // Release: a producer learns of the job only after this (the engine sends it the job later).
  tally[job % kTallySlots].store(tally_tag(job) | reports, std::memory_order_release);
}

bool ReportGate::tick_tally(uint64_t job) {
  std::atomic<uint64_t>& slot = tally[job % kTallySlots];
  uint64_t value = slot.load(std::memory_order_acquire);
  for (;;) {
    if ((value & ~kTallyCountMask) != tally_tag(job)) return false;
    const uint64_t missing = value & kTallyCountMask;
    if (missing == 0) return true;
    if (slot.compare_exchange_weak(value, value - 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
      return missing == 1;
    }
  }
}

void ReportGate::end_tally(uint64_t job) {
  std::atomic<uint64_t>& slot = tally[job % kTallySlots];
  uint64_t value = slot.load(std::memory_order_acquire);
  while ((value & ~kTallyCountMask) == tally_tag(job) && (value & kTallyCountMask) != 0) {
    if (slot.compare_exchange_weak(value, tally_tag(job), std::memory_order_acq_rel, std::memory_order_acquire)) return;
  }
}

void ReportGate::forget_tallies() {
  for (std::atomic<uint64_t>& slot : tally) slot.store(0, std::memory_order_relaxed);
}

GateMark ReportGate::mark() const {
  // seq_cst (also acquire): pairs with the counts, so what they count is visible on the rings.
  return {posted.load(std::memory_order_seq_cst), urgent.load(std::memory_order_seq_cst),
          releases.load(std::memory_order_seq_cst)};
}

bool ReportGate::wait(Os& os, const GateMark& since, uint64_t gated, int64_t timeout_ns, uint64_t releases_wanted,
                      GateWaitEnd* end, int64_t slack_ns) {
  HUGEPIN_REQUIRE(gated >= 1, "a wait for ", gated, " reports");
  GateWaitEnd ignored;
  GateWaitEnd& how = end != nullptr ? *end : ignored;
  how = GateWaitEnd::kMet;
  const uint64_t target = since.posted + gated;
  const uint64_t release_target = releases_wanted > 0 ? since.releases + releases_wanted : kNoTarget;
  auto met = [&] {
    return posted.load(std::memory_order_seq_cst) >= target ||
           releases.load(std::memory_order_seq_cst) >= release_target ||
           urgent.load(std::memory_order_seq_cst) != since.urgent;
  };
  if (met()) return true;
  const int64_t deadline = deadline_after(os, timeout_ns);
  wake_at.store(target, std::memory_order_seq_cst);
  release_wake_at.store(release_target, std::memory_order_seq_cst);
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
      how = GateWaitEnd::kTimedOut;
      return false;
    }
    // Woken, spurious, EAGAIN, EINTR, timed out: re-check.
    const int result = os.futex_wait(&word, seen, remaining, slack_ns);
    if (result == -ETIMEDOUT && met()) {
      // Still counted in `sleepers`: whatever met the target was counted while a producer could
      // see this sleeper, and owes it a wake. Acquire: pairs with the release bump in count().
      how = word.load(std::memory_order_acquire) != seen ? GateWaitEnd::kWokenLate : GateWaitEnd::kNoWake;
      sleepers.fetch_sub(1, std::memory_order_relaxed);
      return true;
    }
    sleepers.fetch_sub(1, std::memory_order_relaxed);
  }
}

}  // namespace hugepin
