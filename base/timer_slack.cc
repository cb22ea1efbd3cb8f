#include "base/timer_slack.h"

#include <sys/prctl.h>

namespace hugepin {

TimerSlackScope::TimerSlackScope(int64_t slack_ns) {
  if (slack_ns <= 0) return;
  const int current = ::prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  // 0: a real-time thread, whose timers never slip (and PR_SET_TIMERSLACK 0 would not restore it
  // but reset it to the process default). Negative: prctl failed; leave the thread as it is.
  if (current <= 0 || static_cast<uint64_t>(current) >= static_cast<uint64_t>(slack_ns)) return;
  if (::prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(slack_ns), 0, 0, 0) == 0) {
    restore_ns_ = static_cast<unsigned long>(current);
  }
}

TimerSlackScope::~TimerSlackScope() {
  if (restore_ns_ != 0) ::prctl(PR_SET_TIMERSLACK, restore_ns_, 0, 0, 0);
}

}  // namespace hugepin
