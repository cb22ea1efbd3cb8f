// ClockModel: the arithmetic of dma/gpu_clock.h, apart from CUDA so that it is tested without a
// GPU (dma/clock_model_test.cc): which round's origin to keep, the rate of the GPU's clock against
// CLOCK_MONOTONIC, and where an event lies given its GPU time from the origin.
//
// A round (gpu_clock.h) gives three host stamps and one GPU clock reading:
//   before        the host raised the gate's flag;
//   acknowledged  the host saw the gate's answer; gate_time (%globaltimer) was read in between;
//   after         the host saw the round's origin event done; the origin lies in [before, after].
// and, where the GPU could bracket it, a bound of its own on the origin's lateness:
//   gpu_bound     the origin was recorded at most this many GPU ns after gate_time (an opening
//                 event before the gate, the gate's own start, and the events' elapsed time), so
//                 it lies no later than acknowledged + gpu_bound: a bound that holds however late
//                 the host comes to see the origin done.
// The origin's window is [before, the earlier of the two bounds]. Each window also gets
// kResolutionNs: cudaEventElapsedTime is documented to about 0.5 us, and %globaltimer ticks in
// steps on some GPUs.
//
// The rate comes from two handshakes (before..acknowledged, and gate_time), an anchor and a later
// one at least kRateBaselineNs of GPU time apart: its error is the two windows over that baseline.
// Until a rate is measured, a handshake half as wide as the anchor's replaces it.
// The anchor moves on every kRateRebaseNs, and the error applied is never below kDriftFloor: the
// rate itself wanders (NTP slews CLOCK_MONOTONIC; the probe's estimates of one host differed by
// 0.4 ppm between runs), and an estimate that claimed more than that would, over minutes, put
// events outside their windows. Until one is measured, kAssumedDrift.
//
// An origin gets older as rounds go by; placing an event from it costs twice the rate's error per
// nanosecond between them, plus float's rounding of the elapsed time. A round's origin replaces the
// current one when its window is no wider than the current one's has grown to by then: a round
// stretched by a busy GPU keeps the better origin, until that one is worse.
//
// Not thread-safe: GpuClock holds it under its mutex.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace hugepin {

class ClockModel {
 public:
  struct Round {
    int64_t before_ns = 0;
    int64_t acknowledged_ns = 0;
    int64_t after_ns = 0;
    uint64_t gate_time = 0;
    int64_t gpu_bound_ns = -1;  // -1: the GPU gave no bound
    // The latest the origin can lie: the host's sight of it, or the GPU's bracket (its elapsed
    // time's resolution included, and the rate's error over it at the assumed drift).
    int64_t latest_ns() const {
      if (gpu_bound_ns < 0) return after_ns;
      const auto slack = static_cast<int64_t>(std::ceil(static_cast<double>(gpu_bound_ns) * kAssumedDrift));
      // Two resolutions: the opening-to-origin elapsed time's, and %globaltimer's steps between
      // the gate's two readings.
      return std::min(after_ns, acknowledged_ns + gpu_bound_ns + 2 * kResolutionNs + slack);
    }
    int64_t origin_ns() const { return before_ns + (latest_ns() - before_ns) / 2; }
    int64_t origin_window_ns() const { return latest_ns() - before_ns + kResolutionNs; }
    int64_t handshake_ns() const { return before_ns + (acknowledged_ns - before_ns) / 2; }
    int64_t handshake_window_ns() const { return acknowledged_ns - before_ns + kResolutionNs; }
  };
  struct Placed {
    int64_t ns = 0;         // CLOCK_MONOTONIC
    int64_t window_ns = 0;  // the event lies within half of this of ns
  };

  static constexpr int64_t kResolutionNs = 1'000;
  static constexpr int64_t kRateBaselineNs = 1'000'000'000;
  static constexpr int64_t kRateRebaseNs = 10'000'000'000;
  // The rate difference assumed until one is measured (12.6-13.0 ppm was measured on the H200
  // host; this allows about four times that), and the least error ever applied to a measured one.
  static constexpr double kAssumedDrift = 50e-6;
  static constexpr double kDriftFloor = 1e-6;
  // Relative rounding of the float milliseconds cudaEventElapsedTime returns (2^-23 and a bit).
  static constexpr double kElapsedPrecision = 1.2e-7;

  bool has_origin() const { return has_origin_; }
  int64_t origin_ns() const { return origin_ns_; }
  int64_t origin_window_ns() const { return origin_window_ns_; }
  double rate() const { return rate_; }
  double drift_error() const { return std::max(rate_error_, kDriftFloor); }
  bool rate_measured() const { return rate_error_ < kAssumedDrift; }

  // Takes what `round` says; true when its origin is now the current one (the caller swaps its
  // origin event in then).
  bool take(const Round& round) {
    const int64_t window = round.origin_window_ns();
    const bool taken = !has_origin_ || window <= grown_window(round.origin_ns() - origin_ns_);
    if (taken) {
      has_origin_ = true;
      origin_ns_ = round.origin_ns();
      origin_window_ns_ = window;
    }
    measure_rate(round);
    return taken;
  }

  // An event `elapsed_gpu_ns` after the origin by the GPU's clock (negative: before it).
  Placed place(double elapsed_gpu_ns) const {
    const double spread = std::abs(elapsed_gpu_ns) * (2 * drift_error() + kElapsedPrecision);
    return {origin_ns_ + std::llround(elapsed_gpu_ns * rate_),
            origin_window_ns_ + kResolutionNs + static_cast<int64_t>(std::ceil(spread))};
  }

 private:
  // The current origin's window as an event `age_ns` from it would see it.
  int64_t grown_window(int64_t age_ns) const {
    const double spread = std::abs(static_cast<double>(age_ns)) * (2 * drift_error() + kElapsedPrecision);
    return origin_window_ns_ + kResolutionNs + static_cast<int64_t>(std::ceil(spread));
  }

  void measure_rate(const Round& round) {
    if (!anchored_) {
      anchor_ = round;
      anchored_ = true;
      return;
    }
    const auto gpu_ns = static_cast<double>(static_cast<int64_t>(round.gate_time - anchor_.gate_time));
    const int64_t window = round.handshake_window_ns();
    const int64_t anchor_window = anchor_.handshake_window_ns();
    // While no rate is measured, a handshake half as wide makes a better anchor: from a wide one (a
    // first round among other ranks' start-up, say) the pair's error may stay above the assumed
    // drift at the baseline, and the windows grow at the assumed drift until a rate is measured.
    const bool better_anchor = !rate_measured() && 2 * window <= anchor_window;
    if (gpu_ns < static_cast<double>(kRateBaselineNs)) {
      // Early on, any narrower handshake makes a better anchor.
      const bool early = gpu_ns < static_cast<double>(kRateBaselineNs / 4) && window < anchor_window;
      if (early || better_anchor) anchor_ = round;
      return;
    }
    const double error = static_cast<double>(anchor_window + window) / 2 / gpu_ns;
    // No worse than the current one's error as applied: below the floor, the newer wins.
    if (error <= drift_error()) {
      rate_ = static_cast<double>(round.handshake_ns() - anchor_.handshake_ns()) / gpu_ns;
      rate_error_ = error;
    } else if (better_anchor) {
      anchor_ = round;  // too wide an anchor to measure from yet
      return;
    }
    if (gpu_ns > static_cast<double>(kRateRebaseNs)) anchor_ = round;
  }

  bool has_origin_ = false;
  int64_t origin_ns_ = 0;
  int64_t origin_window_ns_ = 0;
  double rate_ = 1.0;  // host ns per GPU ns
  double rate_error_ = kAssumedDrift;
  bool anchored_ = false;
  Round anchor_{};
};

}  // namespace hugepin
