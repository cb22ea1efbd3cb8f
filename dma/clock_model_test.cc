// ClockModel on made-up rounds: a GPU clock of a chosen rate, rounds whose events and gate
// readings fall anywhere in their windows (edges included), and events placed from the model
// must lie within half their window of the truth: idle, under long load, when the rate wanders,
// and from a wide first round.
#include "dma/clock_model.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <initializer_list>
#include <random>

namespace hugepin {
namespace {

// The truth: host time (ns) and a GPU clock running at `ppm` against it, which may change.
struct Truth {
  double gpu_at_zero = 5e12;
  double ppm = -12.7;
  double gpu_ns(double host_ns) const { return gpu_at_zero + host_ns * (1 + ppm * 1e-6); }
  // Changes the rate from `host_ns` on, keeping the clock continuous.
  void set_ppm(double host_ns, double new_ppm) {
    const double at = gpu_ns(host_ns);
    ppm = new_ppm;
    gpu_at_zero = at - host_ns * (1 + ppm * 1e-6);
  }
};

class Rig {
 public:
  explicit Rig(uint64_t seed) : random_(seed) {}

  // A round starting at host time t: the origin somewhere in a window of `window_ns`, the gate's
  // reading somewhere in a handshake of `handshake_ns`. Returns the origin's true host time.
  double round(ClockModel& model, double t, int64_t window_ns, int64_t handshake_ns) {
    ClockModel::Round r;
    r.before_ns = static_cast<int64_t>(t);
    r.acknowledged_ns = r.before_ns + handshake_ns;
    r.after_ns = r.before_ns + window_ns;
    r.gate_time = static_cast<uint64_t>(truth.gpu_ns(t + handshake_ns * pick()));
    const double origin = t + static_cast<double>(window_ns) * pick();
    if (model.take(r)) origin_gpu_ = truth.gpu_ns(origin);
    return origin;
  }

  // A round whose host saw its origin `late_ns` after it happened, and whose GPU bracketed it: the
  // origin somewhere in the `bound_ns` after the gate's reading, which is somewhere in a handshake
  // of `handshake_ns`. Returns the origin's true host time.
  double bracketed_round(ClockModel& model, double t, int64_t handshake_ns, int64_t bound_ns, int64_t late_ns) {
    ClockModel::Round r;
    r.before_ns = static_cast<int64_t>(t);
    r.acknowledged_ns = r.before_ns + handshake_ns;
    const double gate = t + static_cast<double>(handshake_ns) * pick();
    r.gate_time = static_cast<uint64_t>(truth.gpu_ns(gate));
    const double origin = gate + static_cast<double>(bound_ns) * pick();
    r.after_ns = static_cast<int64_t>(std::ceil(origin)) + late_ns;
    r.gpu_bound_ns = bound_ns;
    if (model.take(r)) origin_gpu_ = truth.gpu_ns(origin);
    return origin;
  }

  // Places an event at host time t; checks that the truth is inside the window.
  void check_event(ClockModel& model, double t) {
    const ClockModel::Placed placed = model.place(truth.gpu_ns(t) - origin_gpu_);
    const double error = static_cast<double>(placed.ns) - t;
    CAPTURE(t);
    CAPTURE(error);
    CAPTURE(placed.window_ns);
    CHECK(std::abs(error) <= static_cast<double>(placed.window_ns) / 2);
    worst_share = std::max(worst_share, std::abs(error) / (static_cast<double>(placed.window_ns) / 2));
  }

  // `rounds` idle rounds 50 ms apart from host time 1 s, each followed by events `offsets` after it.
  void idle_rounds(ClockModel& model, int rounds, std::initializer_list<double> offsets) {
    for (int i = 0; i < rounds; ++i) {
      const double t = 1e9 + i * 50e6;
      round(model, t, 10'000, 2'500);
      for (double offset : offsets) check_event(model, t + offset);
    }
  }

  Truth truth;
  double worst_share = 0;  // the largest error seen, as a share of its half window

 private:
  // Where in a window: its two edges as often as anywhere inside.
  double pick() {
    const uint64_t kind = random_() % 4;
    if (kind == 0) return 0;
    if (kind == 1) return 1;
    return std::uniform_real_distribution<double>(0, 1)(random_);
  }
  std::mt19937_64 random_;
  double origin_gpu_ = 0;
};

TEST_CASE("idle rounds every 50 ms: a narrow origin, the rate measured, every event inside its window") {
  ClockModel model;
  Rig rig(1);
  rig.idle_rounds(model, 200, {20e6, -3e6});
  CHECK(model.rate() != 1.0);
  CHECK(std::abs((model.rate() - 1) * 1e6 - 12.7) < 1.0);  // host ns per GPU ns: the GPU runs slow
  CHECK(model.drift_error() == ClockModel::kDriftFloor);
  CHECK(model.origin_window_ns() <= 11'000);
}

TEST_CASE("a minute of wide rounds under load keeps the narrow origin until it has grown wider") {
  ClockModel model;
  Rig rig(2);
  double t = 1e9;
  for (int i = 0; i < 60; ++i, t += 50e6) rig.round(model, t, 10'000, 2'500);  // three seconds idle
  int taken_wide = 0;
  for (int i = 0; i < 1200; ++i, t += 50e6) {
    const int64_t before = model.origin_window_ns();
    rig.round(model, t, 120'000, 40'000);
    if (model.origin_window_ns() != before) ++taken_wide;
    rig.check_event(model, t + 10e6);
  }
  CHECK(taken_wide > 0);  // the idle origin aged out at last
  for (int i = 0; i < 20; ++i, t += 50e6) {  // idle again: narrow at once
    rig.round(model, t, 10'000, 2'500);
    rig.check_event(model, t + 10e6);
  }
  CHECK(model.origin_window_ns() <= 11'000);
}

TEST_CASE("a rate that wanders by 0.8 ppm (a host clock slewed) stays inside the error bars") {
  ClockModel model;
  Rig rig(3);
  double t = 1e9;
  for (int i = 0; i < 400; ++i, t += 50e6) {  // 20 s: rebased, rate well measured
    rig.round(model, t, 10'000, 2'500);
    rig.check_event(model, t + 25e6);
  }
  rig.truth.set_ppm(t, -13.5);
  for (int i = 0; i < 1200; ++i, t += 50e6) {  // a minute more, wide rounds only: the origin ages
    rig.round(model, t, 60'000, 20'000);
    rig.check_event(model, t + 25e6);
  }
}

TEST_CASE("a wide first handshake, then narrow ones from 400 ms on: the rate a second after the first narrow one") {
  ClockModel model;
  Rig rig(7);
  rig.round(model, 1e9, 150'000, 110'000);  // (110 + 3) / 2 us over a second: above the assumed drift
  double t = 1e9 + 400e6;
  for (int i = 0; i < 22; ++i, t += 50e6) {  // the last, 1.05 s after the first narrow one
    rig.round(model, t, 10'000, 2'500);
    rig.check_event(model, t + 10e6);
  }
  CHECK(model.rate_measured());
  CHECK(model.drift_error() < 10e-6);
}

TEST_CASE("a very wide first handshake, then narrow ones a rate's baseline apart: measured on the third") {
  // As the clock's rate-seeking rounds come before timing is in use: 1.05 s apart.
  ClockModel model;
  Rig rig(8);
  rig.round(model, 1e9, 400'000, 300'000);  // (300 + 3) / 2 us over 1.05 s: far above the assumed drift
  rig.round(model, 1e9 + 1.05e9, 10'000, 2'500);
  CHECK_FALSE(model.rate_measured());
  rig.round(model, 1e9 + 2.1e9, 10'000, 2'500);
  CHECK(model.rate_measured());
  CHECK(model.drift_error() < 10e-6);
  rig.check_event(model, 1e9 + 2.2e9);
}

TEST_CASE("a wide first round: events stay inside their windows, and a narrow round takes over") {
  ClockModel model;
  Rig rig(4);
  rig.round(model, 1e9, 400'000, 150'000);
  CHECK(model.origin_window_ns() == 401'000);
  rig.check_event(model, 1e9 + 30e6);
  rig.round(model, 1e9 + 50e6, 10'000, 2'500);
  CHECK(model.origin_window_ns() == 11'000);
  rig.check_event(model, 1e9 + 60e6);
  CHECK(model.rate() == 1.0);  // no baseline yet
}

TEST_CASE("an origin the host saw late but the GPU bracketed: the narrower bound, events inside") {
  ClockModel model;
  Rig rig(6);
  double t = 1e9;
  for (int i = 0; i < 100; ++i, t += 50e6) {  // the host sees every origin 150 us late
    rig.bracketed_round(model, t, 3'000, 6'000, 150'000);
    rig.check_event(model, t + 20e6);
  }
  CHECK(model.origin_window_ns() <= 3'000 + 6'000 + 3 * ClockModel::kResolutionNs + 1);
  CHECK(rig.worst_share > 0.5);  // not padded either
  ClockModel::Round host_first{1'000, 3'000, 5'000, 0, 50'000};  // seen before the GPU's bound
  CHECK(host_first.latest_ns() == 5'000);
  ClockModel::Round no_bound{1'000, 3'000, 5'000, 0};
  CHECK(no_bound.latest_ns() == 5'000);
}

TEST_CASE("the error bars are not loose: the worst event uses a fair share of its half window") {
  // A check that only ever saw errors far inside their bars could not tell a right model from one
  // whose windows are padded; with edges picked often, the worst comes close to the bar.
  ClockModel model;
  Rig rig(5);
  rig.idle_rounds(model, 100, {1e3});
  CHECK(rig.worst_share > 0.5);
}

}  // namespace
}  // namespace hugepin
