// GpuClock: places a device's timing events on CLOCK_MONOTONIC, to within a few microseconds
// whatever else runs on the GPU: the GPU ends behind CopyEngine::span().
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
// a query's time. In the probe (bench/probes/gpu_clock_probe.cu, its "gate" way) that was 9-13 us
// at the median on the H200 host, idle or with copies, one process or four, with or without MPS.
// A second kernel stamping %globaltimer behind the origin, tried first, needed an SM for it: with
// `hugepin bench offload`'s copy kernels on the GPU its windows were 15-225 us at the median.
//
// The GPU's clock runs at its own rate: 12.6-13.0 ppm slower than CLOCK_MONOTONIC on the H200
// host (the probe, nine processes). Timing events and %globaltimer count the same clock (over 12 s
// on the idle H200 the gap between the two stayed within 0.5 us, the probe), and the handshake of
// step 2 places a %globaltimer reading within [before, acknowledged], 2-4 us wide there: two
// handshakes a second or more apart measure the rate, which place() applies; until then (the
// first kRateBaselineNs), an assumed bound goes into the window.
//
// Rounds: one when the clock is made (an engine's creation, when its GPU is likely idle), then, on
// a thread of the clock's, one every kRoundEveryNs while place() was called in the last
// kKeepFreshNs and one every kIdleRoundEveryNs otherwise: the rate needs handshakes a second or
// more apart, and a GPU busy with copies answers slowly (in dma_cuda_test, with DMA copies filling
// the link both ways, windows of 22-26 us against 8-14 idle; wider under `hugepin bench offload`'s
// load), so rounds while nothing is timed are what keep a narrow origin and a measured rate at
// hand when timing starts. Their cost: a one-thread kernel, and about 10 us of the thread's
// spinning, a second. A round's origin replaces the current one when its window is no wider than
// the current one's has grown to by then (the drift allowance over its age), so that a round
// stretched by a busy GPU keeps the better origin. The rate likewise keeps its best estimate.
//
// Host waits for the GPU spin kSpinNs, then sleep between looks, from kFirstSleepNs doubling to
// kLongestSleepNs: a gate that cannot start soon (every SM busy) costs no CPU.
//
// Thread-safety: place() from any thread.
#pragma once

#include <cuda_runtime.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hugepin {

class GpuClock {
 public:
  struct Placed {
    int64_t ns = 0;         // CLOCK_MONOTONIC
    int64_t window_ns = 0;  // the event lies within half of this of ns
  };

  // Between rounds while place() is used, how long after its last use that pace holds, and
  // between rounds otherwise.
  static constexpr int64_t kRoundEveryNs = 50'000'000;
  static constexpr int64_t kKeepFreshNs = 1'000'000'000;
  static constexpr int64_t kIdleRoundEveryNs = 1'000'000'000;
  static constexpr int64_t kSpinNs = 50'000;
  static constexpr int64_t kFirstSleepNs = 20'000;
  static constexpr int64_t kLongestSleepNs = 1'000'000;
  // The rate is measured over at least this much GPU time (its error: the two handshakes' windows
  // over this baseline), and over at most kRateRebaseNs (a fresh anchor then, so that a host clock
  // slewed by NTP is followed). In the first quarter of the baseline, a narrower handshake than the
  // anchor's becomes the anchor.
  static constexpr int64_t kRateBaselineNs = 1'000'000'000;
  static constexpr int64_t kRateRebaseNs = 30'000'000'000;
  // The rate difference assumed until one is measured: 12.6-13.0 ppm was measured on the H200 host;
  // this allows about four times that.
  static constexpr double kAssumedDrift = 50e-6;

  // On `device` (selected on the calling thread): runs the first round now. Throws Error when the
  // stream, events, memory or thread cannot be had, or a round fails.
  explicit GpuClock(int device);
  // Waits for a round under way (its kernels are released), then stops the thread.
  ~GpuClock();
  GpuClock(const GpuClock&) = delete;
  GpuClock& operator=(const GpuClock&) = delete;

  // Where `reached`, a timing event of this device that has completed, lies on CLOCK_MONOTONIC.
  // Keeps the rounds going. Throws Error when the event cannot be read, or when a round on the
  // clock's thread failed (the device is likely gone).
  Placed place(cudaEvent_t reached);

  // The window of the current origin and the rate applied (host ns per GPU ns), for tests and
  // diagnostics.
  int64_t origin_window_ns();
  double rate();

  // The last kRecentRounds rounds, oldest first, for diagnostics: when each stamp was taken
  // (CLOCK_MONOTONIC), the %globaltimer the gate read, and whether its origin was taken.
  struct RoundRecord {
    int64_t before_ns = 0;
    int64_t acknowledged_ns = 0;
    int64_t after_ns = 0;
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
  };
  struct Round {
    int64_t before_ns = 0;        // the flag raised
    int64_t acknowledged_ns = 0;  // the gate's answer seen
    int64_t after_ns = 0;         // the origin seen done
    uint64_t gate_time = 0;
    int64_t origin_ns() const { return before_ns + origin_window_ns() / 2; }
    int64_t origin_window_ns() const { return after_ns - before_ns; }
    // Where gate_time lies: the middle of [before, acknowledged], and that span.
    int64_t handshake_ns() const { return before_ns + handshake_window_ns() / 2; }
    int64_t handshake_window_ns() const { return acknowledged_ns - before_ns; }
  };

  Round run_round(cudaEvent_t origin);  // records `origin`; no lock held
  void take(const Round& round);        // under mutex_: the origin's swap, the rate
  void keep_fresh();                    // the thread
  void wait_for(const volatile uint64_t& word, uint64_t round, const char* what);
  void release_resources();

  const int device_;
  cudaStream_t stream_ = nullptr;
  Handshake* handshake_ = nullptr;         // host side
  Handshake* device_handshake_ = nullptr;  // the same, as the kernels see it
  uint64_t rounds_ = 0;                    // the thread's (the constructor's before it starts)

  std::mutex mutex_;
  std::condition_variable wake_;
  cudaEvent_t origin_ = nullptr;     // the current origin, read by place()
  cudaEvent_t candidate_ = nullptr;  // recorded by the next round
  int64_t origin_ns_ = 0;
  int64_t origin_window_ns_ = 0;
  double rate_ = 1.0;                 // host ns per GPU ns
  double rate_error_ = kAssumedDrift;
  bool anchored_ = false;
  Round anchor_{};  // the handshake the rate is measured from
  int64_t last_use_ns_ = INT64_MIN / 2;
  std::vector<RoundRecord> recent_;  // a ring of kRecentRounds
  size_t recent_next_ = 0;
  std::string failure_;  // a failed round on the thread; it stops then
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace hugepin
