// ReportGate: a sleeper wakes when its count of reports is met or an urgent one comes, never
// misses a wake-up across threads, and the producers make a system call only when it is due.
// No timing assertions: the timeouts below only bound a wait that must (or cannot) be met.
#include <doctest/doctest.h>

#include <atomic>
#include <cerrno>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "ipc/report_gate.h"
#include "tests/support/fault_os.h"

namespace hugepin {
namespace {

constexpr int64_t kMillisecond = 1'000'000;
constexpr int64_t kLongEnough = 20'000'000'000;  // a met target returns long before this

// Counts the wake-ups the producers ask the kernel for.
class WakeCountingOs : public test::ForwardingOs {
 public:
  WakeCountingOs() : ForwardingOs(real_os()) {}
  int futex_wake(const std::atomic<uint32_t>* word, int count) override {
    wakes.fetch_add(1, std::memory_order_relaxed);
    return ForwardingOs::futex_wake(word, count);
  }
  std::atomic<uint64_t> wakes{0};
};

TEST_CASE("the sleeper's target: gated reports past the mark, or any urgent one") {
  Os& os = real_os();
  auto gate = std::make_unique<ReportGate>();
  gate->count(os, 5, 0);  // before the mark: not counted toward it
  const GateMark mark = gate->mark();
  CHECK(mark.posted == 5);
  gate->count(os, 2, 0);
  CHECK_FALSE(gate->wait(os, mark, 3, kMillisecond));  // 2 of 3: cannot be met
  gate->count(os, 1, 0);
  CHECK(gate->wait(os, mark, 3, 0));
  CHECK(gate->wait(os, mark, 3, kMillisecond));

  const GateMark later = gate->mark();
  CHECK_FALSE(gate->wait(os, later, 100, kMillisecond));
  gate->count(os, 0, 1);  // a copy failed, a rank attached or left
  CHECK(gate->wait(os, later, 100, kMillisecond));
}

// A futex wait that runs `during` (what other threads do while the sleeper sleeps) and then
// returns `result`: by default that its timer fired, as the kernel does when no FUTEX_WAKE reached
// it in time.
class ScriptedFutexOs : public test::ForwardingOs {
 public:
  explicit ScriptedFutexOs(std::function<void()> during, int result = -ETIMEDOUT)
      : ForwardingOs(real_os()), during_(std::move(during)), result_(result) {}
  int futex_wait(const std::atomic<uint32_t>*, uint32_t, int64_t, int64_t slack_ns) override {
    last_slack_ns = slack_ns;
    during_();
    return result_;
  }
  int64_t last_slack_ns = -1;  // the timer slack the last futex_wait was given

 private:
  std::function<void()> during_;
  int result_;
};

TEST_CASE("a wait whose timer fired says whether a wake was on its way, not yet asked for, or not owed") {
  auto gate = std::make_unique<ReportGate>();
  GateWaitEnd end = GateWaitEnd::kMet;
  {
    // Nothing came: false, timed out. (The fake timer fires at once; the deadline ends the wait.)
    ScriptedFutexOs os([] {});
    CHECK_FALSE(gate->wait(os, gate->mark(), 1, kMillisecond, 0, &end));
    CHECK(end == GateWaitEnd::kTimedOut);
  }
  {
    // A producer counted, bumped the word, and its FUTEX_WAKE had not arrived: late.
    ReportGate& g = *gate;
    ScriptedFutexOs os([&g] {
      g.posted.fetch_add(1);
      g.word.fetch_add(1);
    });
    CHECK(gate->wait(os, gate->mark(), 1, kLongEnough, 0, &end));
    CHECK(end == GateWaitEnd::kWokenLate);
  }
  {
    // A producer counted and had not yet looked for sleepers: no wake asked for.
    ReportGate& g = *gate;
    ScriptedFutexOs os([&g] { g.urgent.fetch_add(1); });
    CHECK(gate->wait(os, gate->mark(), 1000, kLongEnough, 0, &end));
    CHECK(end == GateWaitEnd::kNoWake);
  }
  {
    // A wake that came (0), or a signal (EINTR), after the bump: met, whatever the word says.
    for (const int result : {0, -EINTR}) {
      CAPTURE(result);
      ReportGate& g = *gate;
      ScriptedFutexOs os(
          [&g] {
            g.posted.fetch_add(1);
            g.word.fetch_add(1);
          },
          result);
      CHECK(gate->wait(os, gate->mark(), 1, kLongEnough, 0, &end));
      CHECK(end == GateWaitEnd::kMet);
    }
  }
  {
    // The wait's timer slack reaches the sleep: the thread's own (0) unless the caller widens it.
    ScriptedFutexOs os([] {});
    CHECK_FALSE(gate->wait(os, gate->mark(), 1, kMillisecond, 0, &end));
    CHECK(os.last_slack_ns == 0);
    CHECK_FALSE(gate->wait(os, gate->mark(), 1, kMillisecond, 0, &end, 4 * kMillisecond));
    CHECK(os.last_slack_ns == 4 * kMillisecond);
  }
  // Met at once: no sleep, no timer.
  gate->count(real_os(), 1, 0);
  const GateMark before = GateMark{};
  CHECK(gate->wait(real_os(), before, 1, kMillisecond, 0, &end));
  CHECK(end == GateWaitEnd::kMet);
}

TEST_CASE("which reports are urgent") {
  CHECK(urgent_report(ReportKind::kCopyFailed));
  CHECK(urgent_report(ReportKind::kAttach));
  CHECK(urgent_report(ReportKind::kDetach));
  CHECK_FALSE(urgent_report(ReportKind::kCopyComplete));
  CHECK_FALSE(urgent_report(ReportKind::kComputeRelease));
  CHECK_FALSE(urgent_report(ReportKind::kHeartbeat));
}

TEST_CASE("producers ask the kernel for a wake-up only when the sleeper's target is met") {
  WakeCountingOs os;
  auto gate = std::make_unique<ReportGate>();
  gate->count(os, 10, 0);
  CHECK(os.wakes == 0);  // nobody sleeps: no system call, whatever the counts
  const GateMark mark = gate->mark();
  std::atomic<bool> woke{false};
  std::thread sleeper([&] { woke = gate->wait(os, mark, 4, kLongEnough); });
  while (gate->sleepers.load() == 0) std::this_thread::yield();
  gate->count(os, 1, 0);
  gate->count(os, 2, 0);
  CHECK(os.wakes == 0);  // 3 of 4 while it sleeps
  CHECK_FALSE(woke.load());
  gate->count(os, 1, 0);
  sleeper.join();
  CHECK(woke.load());
  CHECK(os.wakes == 1);
}

TEST_CASE("an urgent report wakes the sleeper whatever its target") {
  WakeCountingOs os;
  auto gate = std::make_unique<ReportGate>();
  const GateMark mark = gate->mark();
  std::atomic<bool> woke{false};
  std::thread sleeper([&] { woke = gate->wait(os, mark, 1000, kLongEnough); });
  while (gate->sleepers.load() == 0) std::this_thread::yield();
  gate->count(os, 0, 1);
  sleeper.join();
  CHECK(woke.load());
  CHECK(os.wakes == 1);
}

TEST_CASE("job tallies: the last report a job waits for ends its tally, no other report does") {
  auto gate = std::make_unique<ReportGate>();
  gate->open_tally(5, 3);
  CHECK_FALSE(gate->tick_tally(5));
  CHECK_FALSE(gate->tick_tally(5));
  CHECK_FALSE(gate->tick_tally(6));  // a slot no job opened
  CHECK_FALSE(gate->tick_tally(5 + ReportGate::kTallySlots));  // job 5's slot, another job
  CHECK(gate->tick_tally(5));
  CHECK(gate->tick_tally(5));  // an extra report of an ended tally wakes too: never asleep too long
  gate->open_tally(5 + ReportGate::kTallySlots, 1);  // the slot's next job
  CHECK_FALSE(gate->tick_tally(5));
  CHECK(gate->tick_tally(5 + ReportGate::kTallySlots));
}

TEST_CASE("a sleeper wakes when a job's tally ends, not for reports of jobs still short") {
  WakeCountingOs os;
  auto gate = std::make_unique<ReportGate>();
  gate->open_tally(1, 2);
  gate->open_tally(2, 2);
  const GateMark mark = gate->mark();
  std::atomic<bool> woke{false};
  std::thread sleeper([&] { woke = gate->wait(os, mark, 1000, kLongEnough); });
  while (gate->sleepers.load() == 0) std::this_thread::yield();
  // A producer: publish, tick, count (what RankAttachment::publish does per report).
  auto report = [&](uint64_t job) { gate->count(os, 1, gate->tick_tally(job) ? 1 : 0); };
  report(1);
  report(2);
  CHECK(os.wakes == 0);  // two reports, each job one short
  CHECK_FALSE(woke.load());
  report(1);
  sleeper.join();
  CHECK(woke.load());
  CHECK(os.wakes == 1);
}

TEST_CASE("a sleeper waiting for compute-releases counts only those") {
  WakeCountingOs os;
  auto gate = std::make_unique<ReportGate>();
  gate->count(os, 3, 0, 3);  // before the mark
  const GateMark mark = gate->mark();
  CHECK(mark.releases == 3);
  std::atomic<bool> woke{false};
  std::thread sleeper([&] { woke = gate->wait(os, mark, 1000, kLongEnough, 2); });
  while (gate->sleepers.load() == 0) std::this_thread::yield();
  gate->count(os, 5, 0);     // copy-completes and heartbeats
  gate->count(os, 1, 0, 1);  // one compute-release of two
  CHECK(os.wakes == 0);
  CHECK_FALSE(woke.load());
  gate->count(os, 1, 0, 1);
  sleeper.join();
  CHECK(woke.load());
  CHECK(os.wakes == 1);
  CHECK_FALSE(gate->wait(os, gate->mark(), 1000, kMillisecond, 1));  // none came: times out
}

TEST_CASE("no wake-up is lost: producer threads against a sleeper that waits for 1 to 4 at a time") {
  Os& os = real_os();
  auto gate = std::make_unique<ReportGate>();
  constexpr uint64_t kProducers = 4;
  constexpr uint64_t kReports = 200'000;  // over all producers
  std::atomic<uint64_t> published{0};  // plays the rings: what the producers made visible
  std::vector<std::thread> producers;
  for (uint64_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      std::mt19937 random(7 + p);
      for (uint64_t i = 0; i < kReports / kProducers; ++i) {
        published.fetch_add(1, std::memory_order_release);
        gate->count(os, 1, 0);
        if (random() % 64 == 0) std::this_thread::yield();  // let the sleeper fall asleep often
      }
    });
  }
  std::mt19937 random(11);
  uint64_t seen = 0;
  uint64_t timeouts = 0;
  while (seen < kReports) {
    const GateMark mark = gate->mark();
    seen = published.load(std::memory_order_acquire);  // "consume" everything counted by the mark
    REQUIRE(seen >= mark.posted);
    if (seen >= kReports) break;
    const uint64_t want = std::min<uint64_t>(kReports - mark.posted, 1 + random() % 4);
    // A lost wake-up shows as a wait that times out although its target was met.
    if (!gate->wait(os, mark, want, kLongEnough)) ++timeouts;
  }
  for (std::thread& producer : producers) producer.join();
  CHECK(timeouts == 0);
  CHECK(gate->posted.load() == kReports);
}

}  // namespace
}  // namespace hugepin
