// CompletionWatcher: runs the CUDA copy engine's completion calls (CopyEngine::when_done) without
// holding up its streams.
//
// cudaLaunchHostFunc, which when_done used first, stalls its stream until the call has run: the
// next job's copies wait for a round trip through the driver's callback thread. On the H200 host,
// with four rank processes sharing the GPU, `hugepin bench offload` then moved 23-68% of the copy
// engine's GB/s, where engines polling events moved 67-97%. Here a call waits behind an event
// recorded on its stream instead, and the stream runs on. Per stream, one thread (started on the
// stream's first call) waits for the events in the order they were recorded, asleep
// (cudaEventBlockingSync: no core spins while copies run), and runs each call once its event has
// fired. Streams get threads of their own up to kMaxThreads; later streams share theirs, whose
// calls then also wait for the calls queued before them there.
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

  explicit CompletionWatcher(int device) : device_(device) {}
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
  void run(Queue& queue);

  const int device_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::vector<cudaEvent_t> spare_events_;
  bool stopping_ = false;
};

}  // namespace hugepin
