#include "dma/gpu_clock.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
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

// Steps 1 and 2 of a round (gpu_clock.h): says it runs, spins until released, reads the clock.
__global__ void clock_gate_kernel(volatile uint64_t* words, uint64_t round) {
  // words: Handshake's fields in order (release, started, acknowledged, gate_time, ...).
  words[1] = round;
  __threadfence_system();
  while (words[0] != round) {
  }
  words[3] = globaltimer();
  __threadfence_system();
  words[2] = round;
  __threadfence_system();
}

uint64_t load(const volatile uint64_t& word) {
  return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(word)).load(std::memory_order_acquire);
}

// Relative precision of the float milliseconds cudaEventElapsedTime returns (2^-23 and a bit).
constexpr double kElapsedPrecision = 1.2e-7;

}  // namespace

GpuClock::GpuClock(int device) : device_(device) {
  try {
    check_cuda(cudaSetDevice(device_), cat("selecting GPU ", device_));
    int least = 0;
    int greatest = 0;
    check_cuda(cudaDeviceGetStreamPriorityRange(&least, &greatest), "reading stream priorities");
    check_cuda(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest), "creating the clock's stream");
    check_cuda(cudaEventCreate(&origin_), "creating a timing event");
    check_cuda(cudaEventCreate(&candidate_), "creating a timing event");
    check_cuda(cudaHostAlloc(reinterpret_cast<void**>(&handshake_), sizeof(Handshake), cudaHostAllocMapped),
               "allocating the clock's handshake");
    *handshake_ = Handshake{};
    check_cuda(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_handshake_), handshake_, 0),
               "mapping the clock's handshake");
    const Round first = run_round(candidate_);
    {
      std::lock_guard lock(mutex_);
      take(first);
    }
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
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
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
  if (handshake_ != nullptr) cudaFreeHost(handshake_);
  (void)cudaGetLastError();
}

GpuClock::Placed GpuClock::place(cudaEvent_t reached) {
  std::lock_guard lock(mutex_);
  if (!failure_.empty()) throw Error(cat("calibrating the GPU clock: ", failure_));
  const int64_t now = real_os().monotonic_ns();
  if (now - last_use_ns_ > kKeepFreshNs) wake_.notify_one();  // the thread may be at the idle pace
  last_use_ns_ = now;
  float elapsed_ms = 0;
  check_cuda(cudaEventElapsedTime(&elapsed_ms, origin_, reached), "placing a timing event");
  const double elapsed_ns = static_cast<double>(elapsed_ms) * 1e6;
  const double spread = std::abs(elapsed_ns) * (2 * rate_error_ + kElapsedPrecision);
  return {origin_ns_ + std::llround(elapsed_ns * rate_), origin_window_ns_ + std::llround(std::ceil(spread))};
}

int64_t GpuClock::origin_window_ns() {
  std::lock_guard lock(mutex_);
  return origin_window_ns_;
}

double GpuClock::rate() {
  std::lock_guard lock(mutex_);
  return rate_;
}

std::vector<GpuClock::RoundRecord> GpuClock::recent_rounds() {
  std::lock_guard lock(mutex_);
  const auto split = static_cast<ptrdiff_t>(recent_.size() < kRecentRounds ? 0 : recent_next_);
  std::vector<RoundRecord> oldest_first(recent_.begin() + split, recent_.end());
  oldest_first.insert(oldest_first.end(), recent_.begin(), recent_.begin() + split);
  return oldest_first;
}

void GpuClock::wait_for(const volatile uint64_t& word, uint64_t round, const char* what) {
  const int64_t start = real_os().monotonic_ns();
  int64_t sleep_ns = kFirstSleepNs;
  while (load(word) != round) {
    if (real_os().monotonic_ns() - start < kSpinNs) {
      cpu_relax();
      continue;
    }
    // Not answering soon: the GPU is busy elsewhere, or the kernels failed (the stream says which).
    const cudaError_t state = cudaStreamQuery(stream_);
    if (state != cudaErrorNotReady && state != cudaSuccess) check_cuda(state, what);
    if (state == cudaSuccess && load(word) != round) {
      throw Error(cat(what, ": the clock's kernels finished without answering round ", round));
    }
    std::this_thread::sleep_for(std::chrono::nanoseconds(sleep_ns));
    sleep_ns = std::min(2 * sleep_ns, kLongestSleepNs);
  }
}

GpuClock::Round GpuClock::run_round(cudaEvent_t origin) {
  const uint64_t round = ++rounds_;
  auto* words = reinterpret_cast<volatile uint64_t*>(device_handshake_);
  std::atomic_ref<uint64_t> release(handshake_->release);
  clock_gate_kernel<<<1, 1, 0, stream_>>>(words, round);
  check_cuda(cudaGetLastError(), "launching the clock's gate");
  // The gate spins until released: every way out of here releases it.
  struct Releaser {
    std::atomic_ref<uint64_t>& release;
    uint64_t round;
    ~Releaser() { release.store(round, std::memory_order_release); }
  } releaser{release, round};
  check_cuda(cudaEventRecord(origin, stream_), "recording the clock's origin");
  wait_for(handshake_->started, round, "starting the clock's gate");
  Round taken;
  taken.before_ns = real_os().monotonic_ns();
  release.store(round, std::memory_order_release);
  // The gate is running and answers within a PCIe round trip, unless the GPU switches it out.
  wait_for(handshake_->acknowledged, round, "reading the clock's gate");
  taken.acknowledged_ns = real_os().monotonic_ns();
  taken.gate_time = load(handshake_->gate_time);
  // Asked back to back: each microsecond of noticing late widens the window by one.
  const int64_t asked_since = taken.acknowledged_ns;
  cudaError_t state;
  while ((state = cudaEventQuery(origin)) == cudaErrorNotReady) {
    if (real_os().monotonic_ns() - asked_since > kSpinNs) break;  // the GPU is busy elsewhere
  }
  if (state == cudaErrorNotReady) state = cudaEventSynchronize(origin);
  check_cuda(state, "waiting for the clock's origin");
  taken.after_ns = real_os().monotonic_ns();
  return taken;
}

void GpuClock::take(const Round& round) {
  const int64_t window = round.origin_window_ns();
  const int64_t grown = origin_window_ns_ + static_cast<int64_t>(2 * rate_error_ *
                                                                 static_cast<double>(round.origin_ns() - origin_ns_));
  const bool taken = !anchored_ || window <= grown;
  if (taken) {
    std::swap(origin_, candidate_);
    origin_ns_ = round.origin_ns();
    origin_window_ns_ = window;
  }
  const RoundRecord record{round.before_ns, round.acknowledged_ns, round.after_ns, round.gate_time, taken};
  if (recent_.size() < kRecentRounds) {
    recent_.push_back(record);
  } else {
    recent_[recent_next_] = record;
  }
  recent_next_ = (recent_next_ + 1) % kRecentRounds;
  // The rate, from this round's handshake and the anchor's: each places its gate_time within half
  // its window.
  const int64_t handshake_window = round.handshake_window_ns();
  if (!anchored_) {
    anchor_ = round;
    anchored_ = true;
    return;
  }
  const auto gpu_ns = static_cast<double>(static_cast<int64_t>(round.gate_time - anchor_.gate_time));
  const int64_t anchor_window = anchor_.handshake_window_ns();
  if (gpu_ns < static_cast<double>(kRateBaselineNs)) {
    if (gpu_ns < static_cast<double>(kRateBaselineNs / 4) && handshake_window < anchor_window) anchor_ = round;
    return;
  }
  const double error = static_cast<double>(anchor_window + handshake_window) / 2 / gpu_ns;
  if (error < rate_error_) {
    rate_ = static_cast<double>(round.handshake_ns() - anchor_.handshake_ns()) / gpu_ns;
    rate_error_ = error;
  }
  // A fresh anchor, as narrow as the old: later estimates follow a host clock that NTP slews, and
  // take over once their baseline makes them better.
  if (gpu_ns > static_cast<double>(kRateRebaseNs) && handshake_window <= anchor_window) anchor_ = round;
}

void GpuClock::keep_fresh() {
  name_this_thread("hugepin-clock");
  (void)cudaSetDevice(device_);
  std::unique_lock lock(mutex_);
  int64_t last_round_ns = real_os().monotonic_ns();  // the constructor's
  while (!stopping_) {
    const int64_t now = real_os().monotonic_ns();
    const bool in_use = now - last_use_ns_ <= kKeepFreshNs;
    const int64_t due = last_round_ns + (in_use ? kRoundEveryNs : kIdleRoundEveryNs);
    if (now < due) {
      wake_.wait_for(lock, std::chrono::nanoseconds(due - now));  // place() wakes it when in use anew
      continue;
    }
    lock.unlock();
    try {
      const Round round = run_round(candidate_);
      lock.lock();
      take(round);
    } catch (const Error& error) {
      if (!lock.owns_lock()) lock.lock();
      failure_ = error.what();
      return;
    }
    last_round_ns = real_os().monotonic_ns();
  }
}

}  // namespace hugepin
