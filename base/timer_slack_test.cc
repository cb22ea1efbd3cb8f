// TimerSlackScope: widens the calling thread's timer slack and puts it back, never narrows it, and
// touches no other thread.
#include "base/timer_slack.h"

#include <doctest/doctest.h>
#include <sys/prctl.h>

#include <thread>

namespace hugepin {
namespace {

long thread_slack_ns() { return ::prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0); }

// Runs `body` on a new thread with a known slack (100 us), so that nothing else in the test
// process depends on the outcome.
template <typename Body>
void on_fresh_thread(Body body) {
  std::thread thread([&] {
    REQUIRE(::prctl(PR_SET_TIMERSLACK, 100'000UL, 0, 0, 0) == 0);
    body();
  });
  thread.join();
}

TEST_CASE("a wider slack for the scope's life, the old one after it") {
  on_fresh_thread([] {
    {
      const TimerSlackScope scope(4'000'000);
      CHECK(thread_slack_ns() == 4'000'000);
    }
    CHECK(thread_slack_ns() == 100'000);
  });
}

TEST_CASE("a slack no wider than the thread's, or none, changes nothing") {
  on_fresh_thread([] {
    for (const int64_t slack : {int64_t{0}, int64_t{-1}, int64_t{50'000}, int64_t{100'000}}) {
      CAPTURE(slack);
      const TimerSlackScope scope(slack);
      CHECK(thread_slack_ns() == 100'000);
    }
    CHECK(thread_slack_ns() == 100'000);
  });
}

TEST_CASE("another thread's slack is left alone") {
  REQUIRE(::prctl(PR_SET_TIMERSLACK, 60'000UL, 0, 0, 0) == 0);
  on_fresh_thread([] {
    const TimerSlackScope scope(4'000'000);
    CHECK(thread_slack_ns() == 4'000'000);
  });
  CHECK(thread_slack_ns() == 60'000);
}

}  // namespace
}  // namespace hugepin
