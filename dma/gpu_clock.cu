#include "dma/gpu_clock.h"

#include <unistd.h>

#include <chrono>
#include <map>
#include <system_error>

#include "base/cpu_relax.h"
#include "base/error.h"
#include "base/os.h"
#include "base/parallel.h"
#include "dma/cuda_check.h"

namespace hugepin {
namespace {

__device__ uint64_t globaltimer() {
  uint64_t now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

// Steps 1 and 2 of a round (gpu_clock.h): says it runs (and since when), spins until released,
// reads the clock and answers; gives up after timeout_ns without a release. words: Handshake's
// fields in order (release, started, acknowledged, gate_time, abandoned, start_time).
__global__ void clock_gate_kernel(volatile uint64_t* words, uint64_t round, uint64_t timeout_ns) {
  words[5] = globaltimer();  // first: the opening event's bound is the gate's earliest reading
  __threadfence_system();
  words[1] = round;
  __threadfence_system();
  // The timeout counts from the host's chance to see `started`: a gate switched out between its
  // start and that (another process's turn on the GPU) must not give up before the host could
  // answer; switched out later, it finds the release on its return.
  const uint64_t start = globaltimer();
  while (words[0] != round) {
    if (globaltimer() - start > timeout_ns) {
      words[4] = round;
      __threadfence_system();
      return;
    }
  }
  words[3] = globaltimer();
  __threadfence_system();
  words[2] = round;
  __threadfence_system();
}

uint64_t load(const uint64_t& word) {
  return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(word)).load(std::memory_order_acquire);
}

}  // namespace

std::shared_ptr<GpuClock> GpuClock::of_device(int device) {
  static std::mutex mutex;
  // By process too: a child forked after a clock was made must not find its parent's, whose
  // thread did not come with it.
  static std::map<std::pair<pid_t, int>, std::weak_ptr<GpuClock>> clocks;
  std::lock_guard lock(mutex);
  std::weak_ptr<GpuClock>& slot = clocks[{::getpid(), device}];
  std::shared_ptr<GpuClock> clock = slot.lock();
  if (!clock) {
    clock = std::make_shared<GpuClock>(device);
    slot = clock;
  }
  return clock;
}

GpuClock::GpuClock(int device) : device_(device) {
  try {
    check_cuda(cudaSetDevice(device_), cat("selecting GPU ", device_));
    int least = 0;
    int greatest = 0;
    check_cuda(cudaDeviceGetStreamPriorityRange(&least, &greatest), "reading stream priorities");
    check_cuda(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest), "creating the clock's stream");
    check_cuda(cudaEventCreate(&origin_), "creating a timing event");
    check_cuda(cudaEventCreate(&candidate_), "creating a timing event");
    check_cuda(cudaEventCreate(&opening_), "creating a timing event");
    check_cuda(cudaHostAlloc(reinterpret_cast<void**>(&handshake_), sizeof(Handshake), cudaHostAllocMapped),
               "allocating the clock's handshake");
    *handshake_ = Handshake{};
    check_cuda(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_handshake_), handshake_, 0),
               "mapping the clock's handshake");
    // The first round runs on the thread at once: an engine's creation never waits on it, and a
    // GPU or host too busy for a gate's handshake then costs only timing, never the engine.
    thread_ = std::thread([this] { keep_fresh(); });
  } catch (const std::system_error& error) {
    release_resources();
    throw Error(cat("starting the GPU clock's thread: ", error.what()), error.code().value());
  } catch (...) {
    release_resources();
    throw;
  }
}

GpuClock::~GpuClock() {
  stopping_ = true;
  {
    std::lock_guard lock(mutex_);  // the thread checks stopping_ under it before it waits
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  release_resources();
}

void GpuClock::release_resources() {
  if (stream_ != nullptr) {
    (void)cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  if (origin_ != nullptr) cudaEventDestroy(origin_);
  if (candidate_ != nullptr) cudaEventDestroy(candidate_);
  if (opening_ != nullptr) cudaEventDestroy(opening_);
  if (handshake_ != nullptr) cudaFreeHost(handshake_);
  (void)cudaGetLastError();
}

void GpuClock::keep_calibrating() {
  if (calibrating_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(mutex_);
  if (calibrating_) return;
  calibrating_ = true;
  wake_.notify_one();
}

GpuClock::Placed GpuClock::place(cudaEvent_t reached) {
  std::unique_lock lock(mutex_);
  const auto given_up = [&] {
    return Error(cat("calibrating the GPU clock: ", failures_in_a_row_, " rounds in a row failed: ", last_failure_));
  };
  if (failures_in_a_row_ >= kFailuresToGiveUp) throw given_up();
  const int64_t now = real_os().monotonic_ns();
  if (!calibrating_ || now - last_use_ns_ > kKeepFreshNs) wake_.notify_one();  // at the idle pace, or not started
  calibrating_ = true;
  last_use_ns_ = now;
  if (!model_.has_origin() && !waited_for_origin_) {
    // Once per clock, and only while the thread's first tries are under way: after that a place()
    // without an origin fails at once rather than each one waiting (span() callers take many in a
    // row, and a gate that cannot start on a GPU whose SMs are all taken has no deadline of its own).
    waited_for_origin_ = true;
    origin_taken_.wait_for(lock, std::chrono::nanoseconds(kFirstOriginWaitNs), [&] {
      return model_.has_origin() || first_tries_ >= kFirstTries || failures_in_a_row_ >= kFailuresToGiveUp ||
             stopping_;
    });
  }
  if (!model_.has_origin()) {
    if (failures_in_a_row_ >= kFailuresToGiveUp) throw given_up();
    throw Error(cat("placing a timing event: the GPU clock has no origin yet (", rounds_dropped_,
                    " rounds dropped: their gate found no release in time; the GPU or this host is busy",
                    failures_in_a_row_ > 0 ? cat("; the last round failed: ", last_failure_) : std::string(), ")"));
  }
  float elapsed_ms = 0;
  check_cuda(cudaEventElapsedTime(&elapsed_ms, origin_, reached), "placing a timing event");
  return model_.place(static_cast<double>(elapsed_ms) * 1e6);
}

int64_t GpuClock::origin_window_ns() {
  std::lock_guard lock(mutex_);
  return model_.origin_window_ns();
}

double GpuClock::rate() {
  std::lock_guard lock(mutex_);
  return model_.rate();
}

double GpuClock::drift_error() {
  std::lock_guard lock(mutex_);
  return model_.drift_error();
}

std::vector<GpuClock::RoundRecord> GpuClock::recent_rounds() {
  std::lock_guard lock(mutex_);
  const auto split = static_cast<ptrdiff_t>(recent_.size() < kRecentRounds ? 0 : recent_next_);
  std::vector<RoundRecord> oldest_first(recent_.begin() + split, recent_.end());
  oldest_first.insert(oldest_first.end(), recent_.begin(), recent_.begin() + split);
  return oldest_first;
}

template <typename Done>
bool GpuClock::wait_until(Done done, const char* what) {
  const int64_t start = real_os().monotonic_ns();
  int64_t sleep_ns = kFirstSleepNs;
  while (!done()) {
    if (stopping_) return false;
    if (real_os().monotonic_ns() - start < kSpinNs) {
      cpu_relax();
      continue;
    }
    // Not answering soon: the GPU is busy elsewhere, or the gate failed (the stream says which).
    const cudaError_t state = cudaStreamQuery(stream_);
    if (state != cudaErrorNotReady && state != cudaSuccess) check_cuda(state, what);
    if (state == cudaSuccess && !done()) throw Error(cat(what, ": the clock's stream finished without answering"));
    std::this_thread::sleep_for(std::chrono::nanoseconds(sleep_ns));
    sleep_ns = std::min(2 * sleep_ns, kLongestSleepNs);
  }
  return true;
}

std::optional<ClockModel::Round> GpuClock::run_round(cudaEvent_t origin) {
  const uint64_t round = ++rounds_;
  auto* words = reinterpret_cast<volatile uint64_t*>(device_handshake_);
  std::atomic_ref<uint64_t> release(handshake_->release);
  // Armed before the launch: whatever happens below, a gate that runs is released.
  struct Releaser {
    std::atomic_ref<uint64_t>& release;
    uint64_t round;
    ~Releaser() { release.store(round, std::memory_order_release); }
  } releaser{release, round};
  (void)cudaGetLastError();  // a failure left by an earlier call on this thread is not the gate's
  check_cuda(cudaEventRecord(opening_, stream_), "recording the clock's opening");
  clock_gate_kernel<<<1, 1, 0, stream_>>>(words, round, kGateTimeoutNs);
  check_cuda(cudaGetLastError(), "launching the clock's gate");
  check_cuda(cudaEventRecord(origin, stream_), "recording the clock's origin");
  const auto answered = [&] { return load(handshake_->acknowledged) == round || load(handshake_->abandoned) == round; };
  if (!wait_until([&] { return load(handshake_->started) == round || load(handshake_->abandoned) == round; },
                  "starting the clock's gate")) {
    return std::nullopt;
  }
  ClockModel::Round taken;
  taken.before_ns = real_os().monotonic_ns();
  release.store(round, std::memory_order_release);
  // The gate is running and answers within a PCIe round trip, unless the GPU switches it out.
  if (!wait_until(answered, "reading the clock's gate")) return std::nullopt;
  taken.acknowledged_ns = real_os().monotonic_ns();
  if (load(handshake_->acknowledged) != round) return std::nullopt;  // it gave up before the release
  taken.gate_time = load(handshake_->gate_time);
  // Asked back to back: each microsecond of noticing late widens the window by one.
  cudaError_t state;
  while ((state = cudaEventQuery(origin)) == cudaErrorNotReady) {
    if (real_os().monotonic_ns() - taken.acknowledged_ns > kSpinNs) break;  // the GPU is busy elsewhere
  }
  if (state == cudaErrorNotReady) state = cudaEventSynchronize(origin);
  check_cuda(state, "waiting for the clock's origin");
  taken.after_ns = real_os().monotonic_ns();
  taken.gpu_bound_ns = gpu_bound(load(handshake_->start_time), taken.gate_time, origin);
  return taken;
}

int64_t GpuClock::gpu_bound(uint64_t start_time, uint64_t gate_time, cudaEvent_t origin) {
  // The opening was recorded before the gate started, the origin after it ended: the origin lies
  // at most (start_time + opening-to-origin) - gate_time after the gate's reading. How long the
  // gate waited for an SM after the opening is in it; how late the host saw the origin is not.
  float elapsed_ms = 0;
  if (cudaEventElapsedTime(&elapsed_ms, opening_, origin) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;  // the host's bound alone
  }
  const auto spun_ns = static_cast<int64_t>(gate_time - start_time);
  const auto bound = std::llround(static_cast<double>(elapsed_ms) * 1e6) - spun_ns;
  // Below zero beyond the elapsed time's resolution, the two clocks would disagree: trust neither.
  if (bound < -ClockModel::kResolutionNs) return -1;
  return std::max<int64_t>(bound, 0);
}

void GpuClock::take(const ClockModel::Round& round) {
  const bool taken = model_.take(round);
  if (taken) std::swap(origin_, candidate_);
  const RoundRecord record{round.before_ns, round.acknowledged_ns, round.after_ns, round.latest_ns(), round.gate_time,
                           taken};
  if (recent_.size() < kRecentRounds) {
    recent_.push_back(record);
  } else {
    recent_[recent_next_] = record;
  }
  recent_next_ = (recent_next_ + 1) % kRecentRounds;
}

void GpuClock::keep_fresh() {
  name_this_thread("hugepin-clock");
  (void)cudaSetDevice(device_);
  // Queries from this thread must not invalidate a graph another thread captures in global mode.
  cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
  (void)cudaThreadExchangeStreamCaptureMode(&relaxed);
  std::unique_lock lock(mutex_);
  int64_t last_round_ns = INT64_MIN / 2;
  int64_t retry_ns = kRoundEveryNs;
  int rate_tries = 0;  // rounds run for the rate before timing was in use
  while (!stopping_) {
    // Without an origin, up to kFirstTries rounds back to back at once; without a rate, up to
    // kRateTries a baseline apart; then only once in use.
    const bool seeking_first = !model_.has_origin() && first_tries_ < kFirstTries;
    const bool seeking_rate = model_.has_origin() && !model_.rate_measured() && rate_tries < kRateTries;
    if (!calibrating_ && !seeking_first && !seeking_rate) {
      wake_.wait(lock);
      continue;
    }
    const int64_t now = real_os().monotonic_ns();
    const bool in_use = calibrating_ && now - last_use_ns_ <= kKeepFreshNs;
    const int64_t pace = failures_in_a_row_ > 0 ? retry_ns
                         : seeking_first       ? 0
                         : in_use              ? kRoundEveryNs
                         : calibrating_        ? kIdleRoundEveryNs
                                               : kRatePaceNs;
    if (now < last_round_ns + pace) {
      wake_.wait_for(lock, std::chrono::nanoseconds(last_round_ns + pace - now));  // place() wakes it when in use anew
      continue;
    }
    const bool without_origin = !model_.has_origin();
    if (!without_origin && !calibrating_) ++rate_tries;
    lock.unlock();
    std::optional<ClockModel::Round> round;
    std::string failure;
    try {
      round = run_round(candidate_);
    } catch (const Error& error) {
      failure = error.what();
    }
    lock.lock();
    last_round_ns = real_os().monotonic_ns();
    // Counted once the round is over: a place() waits for the first tries' outcome, not their start.
    if (without_origin && !round) ++first_tries_;  // a round without an origin to beat is always taken
    // A place() waiting for a first origin looks again once this thread waits (after take() below):
    // an origin, spent tries or failures end its wait.
    origin_taken_.notify_all();
    if (!failure.empty()) {
      ++failures_in_a_row_;
      last_failure_ = failure;
      retry_ns = std::min(2 * retry_ns, kIdleRoundEveryNs);
      continue;
    }
    failures_in_a_row_ = 0;
    retry_ns = kRoundEveryNs;
    if (round) {
      take(*round);
    } else {
      ++rounds_dropped_;
    }
  }
  origin_taken_.notify_all();  // a place() waiting for a first origin gives up now
}

}  // namespace hugepin
