// Probe: how closely can a process place its CUDA timing events on CLOCK_MONOTONIC, idle and
// with copies on the GPU? `hugepin bench offload` puts each timed job's GPU end on the host clock
// through a calibration (CopyEngine::MarkSpan); under load its windows were 73-153 us wide at the
// median with four ranks under MPS (docs/performance.md), too wide to judge a 100 us overhead.
// This measures, without hugepin in the way:
//   record  the engine's way: host stamp, record an event on a high-priority stream, spin on
//           cudaEventQuery until it is done, host stamp: the event lies in between;
//   gate    a one-thread kernel on that stream, already running, spins on a flag in mapped host
//           memory; the host stamps and raises the flag; the kernel reads %globaltimer, writes it
//           back with an acknowledgement, and exits; an event recorded behind it. The host stamps
//           the acknowledgement (globaltimer window) and the event (event window).
// Three phases of SECONDS each (default 4): idle, with copies (a thread keeps 64 KiB copies of
// both directions out on two other streams), idle. A calibration every 50 ms, alternating the two
// ways. Each event's GPU time is kept relative to the first one (consecutive elapsed times summed
// in double, so float's rounding stays at nanoseconds). The two clocks' drift and the loaded
// windows' truth are worked out offline from the CSV on stdout:
//   phase,way,before_ns,ack_ns,after_ns,event_gpu_ns,globaltimer_ns
// (CLOCK_MONOTONIC; ack_ns and globaltimer_ns only for gate).
// Usage (a GPU): gpu_clock_probe [SECONDS=4] [START_AT_REALTIME_S=0]: several copies started with
// the same START_AT begin their phases together. Not part of hugepin.
#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "bench/probes/probe_support.cuh"

namespace {

using probe::check;

int64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

struct Gate {
  volatile uint64_t release;
  volatile uint64_t started;
  volatile uint64_t acknowledged;
  volatile uint64_t globaltimer;
};

__global__ void gate_kernel(Gate* gate, uint64_t round) {
  gate->started = round;
  __threadfence_system();
  while (gate->release != round) {
  }
  uint64_t now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  gate->globaltimer = now;
  __threadfence_system();
  gate->acknowledged = round;
  __threadfence_system();
}

// Keeps 64 KiB copies of both directions out on two streams until told to stop.
void copy_load(std::atomic<bool>* run, std::atomic<bool>* stop) {
  constexpr size_t kPiece = 64 << 10;
  constexpr size_t kPieces = 64;
  constexpr int kOut = 4;
  char* host = nullptr;
  char* device = nullptr;
  check(cudaMallocHost(&host, 2 * kPiece * kPieces), "cudaMallocHost");
  check(cudaMalloc(&device, 2 * kPiece * kPieces), "cudaMalloc");
  cudaStream_t streams[2];
  for (cudaStream_t& stream : streams) check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  std::vector<cudaEvent_t> events(2 * kOut);
  for (cudaEvent_t& event : events) check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "event");
  uint64_t batch = 0;
  while (!stop->load()) {
    if (!run->load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    for (int direction = 0; direction < 2; ++direction) {
      cudaEvent_t event = events[direction * kOut + batch % kOut];
      if (batch >= kOut) {
        while (cudaEventQuery(event) == cudaErrorNotReady) std::this_thread::yield();
      }
      for (size_t piece = 0; piece < kPieces; ++piece) {
        char* h = host + (direction * kPieces + piece) * kPiece;
        char* d = device + (direction * kPieces + piece) * kPiece;
        check(direction == 0 ? cudaMemcpyAsync(d, h, kPiece, cudaMemcpyHostToDevice, streams[0])
                             : cudaMemcpyAsync(h, d, kPiece, cudaMemcpyDeviceToHost, streams[1]),
              "cudaMemcpyAsync");
      }
      check(cudaEventRecord(event, streams[direction]), "recording");
    }
    ++batch;
  }
  for (cudaStream_t stream : streams) check(cudaStreamSynchronize(stream), "sync");
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 4;
  const long start_at = argc > 2 ? std::atol(argv[2]) : 0;
  check(cudaSetDevice(0), "cudaSetDevice");
  int least = 0, greatest = 0;
  check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "priorities");
  cudaStream_t stream;
  check(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, greatest), "stream");
  Gate* gate = nullptr;
  check(cudaHostAlloc(&gate, sizeof(Gate), cudaHostAllocMapped), "cudaHostAlloc");
  Gate* device_gate = nullptr;
  check(cudaHostGetDevicePointer(&device_gate, gate, 0), "device pointer");
  gate->release = 0;
  gate->started = 0;
  gate->acknowledged = 0;
  gate->globaltimer = 0;
  cudaEvent_t previous, current;
  check(cudaEventCreate(&previous), "event");
  check(cudaEventCreate(&current), "event");
  gate_kernel<<<1, 1, 0, stream>>>(device_gate, 0);  // loads the module before the first phase
  check(cudaStreamSynchronize(stream), "warm-up");
  std::atomic<bool> loading{false}, stop{false};
  std::thread load(copy_load, &loading, &stop);
  if (start_at > 0) {
    while (time(nullptr) < start_at) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  double event_gpu_ns = 0;
  bool first = true;
  uint64_t round = 0;
  std::printf("phase,way,before_ns,ack_ns,after_ns,event_gpu_ns,globaltimer_ns\n");
  const char* phases[] = {"idle", "load", "idle2"};
  for (int phase = 0; phase < 3; ++phase) {
    loading = phase == 1;
    const int64_t phase_end = monotonic_ns() + static_cast<int64_t>(seconds * 1e9);
    for (int i = 0; monotonic_ns() < phase_end; ++i) {
      const bool gated = i % 2 == 1;
      int64_t before = 0, ack = 0, after = 0;
      uint64_t globaltimer = 0;
      if (!gated) {
        before = monotonic_ns();
        check(cudaEventRecord(current, stream), "record");
        cudaError_t state;
        while ((state = cudaEventQuery(current)) == cudaErrorNotReady) {
        }
        check(state, "query");
        after = monotonic_ns();
      } else {
        ++round;
        gate_kernel<<<1, 1, 0, stream>>>(device_gate, round);
        check(cudaEventRecord(current, stream), "record");
        while (gate->started != round) {
        }
        before = monotonic_ns();
        gate->release = round;
        while (gate->acknowledged != round) {
        }
        ack = monotonic_ns();
        globaltimer = gate->globaltimer;
        cudaError_t state;
        while ((state = cudaEventQuery(current)) == cudaErrorNotReady) {
        }
        check(state, "query");
        after = monotonic_ns();
      }
      if (!first) {
        float ms = 0;
        check(cudaEventElapsedTime(&ms, previous, current), "elapsed");
        event_gpu_ns += static_cast<double>(ms) * 1e6;
      }
      first = false;
      std::swap(previous, current);
      std::printf("%s,%s,%lld,%lld,%lld,%.0f,%llu\n", phases[phase], gated ? "gate" : "record",
                  static_cast<long long>(before), static_cast<long long>(ack), static_cast<long long>(after),
                  event_gpu_ns, static_cast<unsigned long long>(globaltimer));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  stop = true;
  load.join();
  return 0;
}
