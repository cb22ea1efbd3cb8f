// GpuClock: places a device's timing events on CLOCK_MONOTONIC with an error bar it measures: the
// GPU ends behind CopyEngine::span(). On the H200 host, with four processes' copies on the GPU,
// the windows were 12-26 us at the median in most rows of `hugepin bench offload`, and up to 98
// us in the first rows of mixed stores and loads (docs/performance.md, tenth session).
//
// CUDA gives a timing event's time only relative to another event (cudaEventElapsedTime), so
// every placement goes through an origin event whose host time is known. The obvious way to
// know it, which the engine used first, records the origin and spins on cudaEventQuery: the
// event lies between the stamps before the record and after the query saw it done. That window
// holds the launch path and the front end's queue: on the H200 host 11-80 us with the GPU idle,
// 20-55 us with four processes under MPS and 150-260 us without MPS (bench/probes/
// gpu_clock_probe.cu), and in `hugepin bench offload` 73-153 us at the median under MPS, too
// wide to judge a 100 us overhead (docs/performance.md).
//
// A round here, on a stream of the clock's at the greatest priority, keeps the launch path and the
// queue out of the window:
//   1. a one-thread kernel, the gate, is launched with the round's origin event behind it; once it
//      runs it spins on a flag in mapped host memory;
//   2. the host stamps (before) and raises the flag; the gate reads %globaltimer and writes it back
//      with an acknowledgement, which the host stamps (acknowledged), and exits;
//   3. the origin, already queued, is reached; the host, asking it back to back, stamps the moment
//      it sees it done (after).
// So the origin lies in [before, after]: its window, the flag's way to the GPU, the gate's exit and
// a query's time. The GPU bounds it too, whenever the host comes to see it: an opening event is
// recorded before the gate, which reads %globaltimer as it starts; the origin lies no later than
// the gate's start plus the opening-to-origin elapsed time, which is (start - gate_time) + that
// after the gate's reading, placed by the handshake: a bound of the handshake's width, the gate's
// wait for an SM, its exit and the origin's record, with no host query in it. The window ends at
// the earlier of the two bounds (ClockModel::Round::latest_ns). Beside `hugepin bench offload`
// under MPS on the H200 host that bound cut 11 of 96 rounds' windows (by 6-367 us); it cannot cut
// the handshake itself, which took 127-131 us at the median there (2-365): the flag's read and the
// answer cross a link that the copies fill both ways. In the probe (bench/probes/gpu_clock_probe.cu, its "gate" way) that was 9-13 us
// at the median on the H200 host, idle or with DMA copies, one process or four, with or without
// MPS; under `hugepin bench offload`'s heavier load, wider (docs/performance.md).
// A second kernel stamping %globaltimer behind the origin, tried first, needed an SM for it: with
// `hugepin bench offload`'s copy kernels on the GPU its windows were 8-225 us at the median.
//
// The GPU's clock runs at its own rate: 12.6-13.0 ppm slower than CLOCK_MONOTONIC on the H200
// host (the probe, nine processes). Timing events and %globaltimer count the same clock (over 12 s
// on the idle H200 the gap between the two stayed within 0.5 us, the probe), and the handshake of
// step 2 places a %globaltimer reading within [before, acknowledged], 2-4 us wide there: two
// handshakes a second or more apart measure the rate, which place() applies.
//
// The arithmetic (which origin to keep, the rate, the error bars) is dma/clock_model.h's.
//
// Rounds, all on a thread of the clock's: one as soon as the clock is made (an engine's creation,
// when its GPU is likely idle; up to kFirstTries when a gate finds no release in time), without
// the maker waiting for it, and up to kRateTries more a rate's baseline apart until the rate is
// measured (an engine's start-up, before its traffic: a rate measured under load waits for a
// narrow handshake, and the assumed drift grows every window by 100 us a second meanwhile; in
// `hugepin bench offload` the first protocol rows after the ranks started read windows of 60-174
// us at the median, tenth session); then, once keep_calibrating() or place() was first called (an
// engine's first timing mark), one every kRoundEveryNs while place() was called in the last
// kKeepFreshNs and one every kIdleRoundEveryNs otherwise. The first place() before any origin
// waits for one up to kFirstOriginWaitNs while the first rounds are under way. A clock that cannot
// get an origin (a gate that never hears its release in time: another process holding the GPU, a
// host too busy to answer) costs its callers their timings only, never the engine: the first version
// ran its first round in the constructor and failed the engine's creation after three dropped
// rounds, which stopped a vLLM rank from attaching on the H200 host. The rate needs handshakes a
// second or more apart, and a GPU busy with copies answers slowly (in dma_cuda_test, with DMA
// copies filling the link both ways, windows of 22-32 us against 8-14 idle), so the rounds between
// timed stretches keep a narrow origin and a measured rate at hand. Their cost, once started: a
// one-thread kernel a second, and the thread's spinning of about 10 us. An engine that never times
// its copies runs the first rounds only (at most kFirstTries + kRateTries).
//
// Bounded waits: host waits for the GPU spin kSpinNs, then sleep between looks, from kFirstSleepNs
// doubling to kLongestSleepNs, so a gate that cannot start soon (every SM busy) costs no CPU; the
// gate gives up by itself after kGateTimeoutNs without a release (the round is then dropped), so a
// host thread held up elsewhere never keeps an SM, or a caller's cudaDeviceSynchronize, waiting for
// longer. The thread's CUDA calls are in relaxed stream-capture mode: a graph captured by another
// thread in global mode is not broken by them. A failed round is retried; place() throws once
// kFailuresToGiveUp rounds in a row have failed (the device is likely gone).
//
// Thread-safety: every call from any thread.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dma/clock_model.h"

namespace hugepin {

class GpuClock {
 public:
  using Placed = ClockModel::Placed;

  static constexpr int64_t kRoundEveryNs = 50'000'000;
  static constexpr int64_t kKeepFreshNs = 1'000'000'000;
  static constexpr int64_t kIdleRoundEveryNs = 1'000'000'000;
  static constexpr int64_t kSpinNs = 50'000;
  static constexpr int64_t kFirstSleepNs = 20'000;
  static constexpr int64_t kLongestSleepNs = 100'000;
  static constexpr int64_t kGateTimeoutNs = 1'000'000;  // from `started`: ten of the host's longest sleeps
  static constexpr int kFailuresToGiveUp = 3;
  static constexpr int kFirstTries = 3;
  static constexpr int kRateTries = 3;
  static constexpr int64_t kRatePaceNs = ClockModel::kRateBaselineNs + kRoundEveryNs;
  static constexpr int64_t kFirstOriginWaitNs = 200'000'000;

  // On `device` (selected on the calling thread): starts the thread, which runs the first round at
  // once and then waits for keep_calibrating(). Throws Error when the stream, events, memory or
  // thread cannot be had.
  explicit GpuClock(int device);
  // Stops the thread (a round under way is dropped, its gate released), then frees the rest.
  ~GpuClock();
  GpuClock(const GpuClock&) = delete;
  GpuClock& operator=(const GpuClock&) = delete;

  // The clock of `device` in this process, shared by every engine on it: made on first use (the
  // device selected on the calling thread), gone with its last user. An engine made anew (a
  // session's set_device_kv for other blocks, the bench's next block size) keeps the measured rate
  // and a narrow origin: with a clock of its own, the rate took a second or more to measure again,
  // the assumed drift grew the windows by 100 us a second meanwhile, and the first rows after each
  // new engine in `hugepin bench offload` read windows of 56-130 us at the median against 13-31 in
  // the rows after (the H200 host, tenth session). Throws as the constructor does.
  static std::shared_ptr<GpuClock> of_device(int device);

  // Starts the rounds on the thread (once; later calls do nothing): an engine's first timing mark.
  void keep_calibrating();

  // Where `reached`, a timing event of this device that has completed, lies on CLOCK_MONOTONIC.
  // Starts or quickens the rounds; without an origin yet, the first such call waits for one up to
  // kFirstOriginWaitNs while the thread's first kFirstTries rounds are under way; the others fail
  // at once.
  // Throws Error when the event cannot be read, when the last kFailuresToGiveUp rounds failed, or
  // when there is still no origin.
  Placed place(cudaEvent_t reached);

  // For tests and diagnostics: the current origin's window, the rate applied (host ns per GPU ns)
  // and its error as applied.
  int64_t origin_window_ns();
  double rate();
  double drift_error();

  // The last kRecentRounds rounds, oldest first, for diagnostics: when each stamp was taken
  // (CLOCK_MONOTONIC), the %globaltimer the gate read, and whether its origin was taken.
  struct RoundRecord {
    int64_t before_ns = 0;
    int64_t acknowledged_ns = 0;
    int64_t after_ns = 0;
    int64_t latest_ns = 0;  // the window's end: after, or the GPU's bound when earlier
    uint64_t gate_time = 0;
    bool taken = false;
  };
  static constexpr size_t kRecentRounds = 32;
  std::vector<RoundRecord> recent_rounds();

 private:
  // Host memory mapped into the device, written by both sides.
  struct Handshake {
    uint64_t release;       // host -> gate: the round it may finish
    uint64_t started;       // gate -> host: the round that is spinning
    uint64_t acknowledged;  // gate -> host: the round whose gate_time is written
    uint64_t gate_time;     // %globaltimer, read between the release and the acknowledgement
    uint64_t abandoned;     // gate -> host: the round it gave up on (no release in kGateTimeoutNs)
    uint64_t start_time;    // gate -> host: %globaltimer as the gate started (before `started`)
  };

  // Records `origin` behind a gate and runs the handshake; no lock held. Empty when the gate gave
  // up or the clock is stopping (the gate released either way).
  std::optional<ClockModel::Round> run_round(cudaEvent_t origin);
  // The GPU's bound on the round's origin (ClockModel::Round::gpu_bound_ns), -1 when it has none.
  int64_t gpu_bound(uint64_t start_time, uint64_t gate_time, cudaEvent_t origin);
  void take(const ClockModel::Round& round);  // under mutex_
  void keep_fresh();                          // the thread
  // Waits until done() says true (false: the clock is stopping); throws Error when the clock's
  // stream failed.
  template <typename Done>
  bool wait_until(Done done, const char* what);
  void release_resources();

  const int device_;
  cudaStream_t stream_ = nullptr;
  Handshake* handshake_ = nullptr;         // host side
  Handshake* device_handshake_ = nullptr;  // the same, as the kernels see it
  uint64_t rounds_ = 0;                    // the thread's
  std::atomic<bool> stopping_{false};

  std::mutex mutex_;
  std::condition_variable wake_;          // the thread's: rounds wanted, or stop
  std::condition_variable origin_taken_;  // place()'s, waiting for a first origin
  ClockModel model_;
  cudaEvent_t origin_ = nullptr;     // the model's origin, read by place()
  cudaEvent_t candidate_ = nullptr;  // recorded by the next round
  cudaEvent_t opening_ = nullptr;    // recorded before each round's gate (the rounds' thread's)
  // keep_calibrating() or place() was called: written under mutex_, read without it by
  // keep_calibrating(), which every timing mark calls (the launch path: no lock once started).
  std::atomic<bool> calibrating_{false};
  int64_t last_use_ns_ = INT64_MIN / 2;
  std::vector<RoundRecord> recent_;  // a ring of kRecentRounds
  size_t recent_next_ = 0;
  int failures_in_a_row_ = 0;
  uint64_t rounds_dropped_ = 0;  // their gate gave up, or the clock was stopping
  int first_tries_ = 0;          // rounds run while the clock had no origin
  bool waited_for_origin_ = false;  // a place() has waited for a first origin (once per clock)
  std::string last_failure_;
  std::thread thread_;
};

}  // namespace hugepin
