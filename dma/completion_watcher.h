// CompletionWatcher: runs the CUDA copy engine's completion calls (CopyEngine::when_done) without
// holding up its streams.
//
// cudaLaunchHostFunc, which when_done used first, stalls its stream until the call has run: the
// next job's copies wait for a round trip through the driver's callback thread. On the H200 host,
// with four rank processes sharing the GPU, `hugepin bench offload` then moved 23-68% of the copy
// engine's GB/s, where engines polling events moved 67-97%. Here a call waits behind an event
// recorded on its stream instead, and the stream runs on. Per stream, one thread (started on the
// stream's first call) waits for the events in the order they were recorded (asleep or polling,
// below), and runs each call once its event has fired. Streams get threads of their own up to
// kMaxThreads; later streams share theirs, whose calls then also wait for the calls queued before
// them there.
//
// How a thread waits for an event is the engine's choice (CopyEngineOptions::completion_poll_ns):
// asleep in cudaEventSynchronize, woken by the driver's interrupt (no polling, but on the H200 host
// the call ran 34-78 us after the copies ended at the median and 271-400 us at p99, by a GPU
// clock since found to run 10-30 us late there), or polling:
// cudaEventQuery, then a sleep of poll_ns, again, while a call waits (each sleep ends within a
// microsecond of slack, and nothing is spent while no call waits; engines that poll their events
// today pay the same). Only a sleeping thread's events are blocking-sync: one that fires wakes the
// driver's event thread (cuda-EvtHandlr), which, when polled events were blocking-sync too, cost
// the rank processes of `hugepin bench offload` on the H200 host 92-228 us of CPU per job and
// hugepin 1-9 points of its share of the copy engine's rate (docs/performance.md).
//
// Thread-safety: add() from any thread. The calls run on the watcher's threads, one at a time per
// thread; they must be quick and must not call CUDA on the same stream synchronously.
#pragma once

#include <cuda_runtime.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace hugepin {

class CompletionWatcher {
 public:
  // fn(context, error): error 0, or EIO when the event reported a failure of the work before it.
  using Call = void (*)(void* context, int error);
  static constexpr size_t kMaxThreads = 4;

  // The timer slack of a polling thread's sleeps.
  static constexpr uint64_t kPollSlackNs = 1000;

  // poll_ns: 0, wait asleep on each event; > 0, ask the event that often (see above).
  CompletionWatcher(int device, int64_t poll_ns) : device_(device), poll_ns_(poll_ns) {}
  // Runs every call still queued, each after its event, then stops the threads.
  ~CompletionWatcher();
  CompletionWatcher(const CompletionWatcher&) = delete;
  CompletionWatcher& operator=(const CompletionWatcher&) = delete;

  // Records an event on `stream` and queues fn(context) behind it. Throws Error, having queued
  // nothing, when the event cannot be created or recorded.
  void add(cudaStream_t stream, Call fn, void* context);

 private:
  struct Pending {
    cudaEvent_t event;
    Call fn;
    void* context;
  };
  struct Queue {
    cudaStream_t stream = nullptr;  // the first stream that used it
    std::deque<Pending> pending;
    std::condition_variable wake;
    std::thread thread;
  };

  Queue& queue_for(cudaStream_t stream);  // under mutex_; starts its thread when new
  cudaEvent_t take_event();               // under mutex_
  bool wait_for(cudaEvent_t event) const;  // true once it fired, false when the work before it failed
  void run(Queue& queue);

  const int device_;
  const int64_t poll_ns_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::vector<cudaEvent_t> spare_events_;
  bool stopping_ = false;
};

}  // namespace hugepin
