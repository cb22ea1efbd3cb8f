// How late the calling thread's timers may fire, widened for a while.
//
// Linux lets every timer of a thread (a futex's timeout, ppoll's, a sleep's) expire anywhere from
// its deadline to its deadline plus the thread's timer slack (50 us by default), so that it can
// fire with an interrupt the CPU takes anyway. A timer that must fire before the next scheduler
// tick has the kernel reprogram the CPU's timer device when it is set, and again when it is
// cancelled because the sleeper was woken first. In a virtual machine each reprogramming can be an
// exit to the hypervisor, charged to the sleeping thread. Measured with
// bench/probes/sleep_cpu_probe.cc (woken 20-100 us after it slept; docs/performance.md), a futex
// sleep with a 1 ms timeout cost its thread 5.1-5.9 us of CPU at the median on the H200 host and
// 7.8-9.6 on the development VM (both Firecracker guests, HZ 250); with the slack at 10 ms, 2.6-3.1
// and 3.0-4.2, and 3.0-4.6 on either when the slack is set and restored around each sleep, as below.
// A slack of at least a tick (4 ms at HZ 250, 10 ms at HZ 100) lets the kernel leave the device
// alone; the timer then fires at the first tick after its deadline.
#pragma once

#include <cstdint>

namespace hugepin {

// Widens the calling thread's timer slack to `slack_ns` for the scope's life and puts the old
// value back when it ends: three prctl(2) calls. Changes nothing when `slack_ns` <= 0 (no call),
// when the thread's slack is already that wide, or for a real-time thread, whose timers the kernel
// never lets slip (one call, to learn that). Not movable: it must end on the thread it began on.
class TimerSlackScope {
 public:
  explicit TimerSlackScope(int64_t slack_ns);
  ~TimerSlackScope();
  TimerSlackScope(const TimerSlackScope&) = delete;
  TimerSlackScope& operator=(const TimerSlackScope&) = delete;

 private:
  unsigned long restore_ns_ = 0;  // 0: nothing to restore
};

}  // namespace hugepin
