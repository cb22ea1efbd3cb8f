// CompletionWatcher: runs the CUDA copy engine's completion calls (CopyEngine::when_done) without
// holding up its streams.
//
// cudaLaunchHostFunc, which when_done used first, stalls its stream until the call has run: the
// next job's copies wait for a round trip through the driver's callback thread. On the H200 host,
// with four rank processes sharing the GPU, `hugepin bench offload` then moved 23-68% of the copy
// engine's GB/s, where engines polling events moved 67-97%. Here a call waits behind an event
// recorded on its stream instead, and the stream runs on. The events of a stream are waited for in
// the order they were recorded, and each call runs once its event has fired, on a thread of the
// watcher's (started on the first call that needs it).
//
// How the events are waited for is the engine's choice (CopyEngineOptions::completion_poll_ns and
// completion_spin):
// - asleep: per stream, a thread sleeps in cudaEventSynchronize, woken by the driver's interrupt
//   (no polling, but on the H200 host the call ran 34-78 us after the copies ended at the median
//   and 271-400 us at p99, by a GPU clock since found to run 10-30 us late there). Only these
//   events are blocking-sync: one that fires wakes the driver's event thread (cuda-EvtHandlr),
//   which, when polled events were blocking-sync too, cost the rank processes of `hugepin bench
//   offload` on the H200 host 92-228 us of CPU per job and hugepin 1-9 points of its share of the
//   copy engine's rate (docs/performance.md).
// - polling: one thread for every stream asks the oldest event of each stream (cudaEventQuery),
//   runs the calls of those that fired, and sleeps poll_ns when none had, again, while a call
//   waits (each sleep ends within a microsecond of slack; nothing is spent while no call waits;
//   engines that poll their events today pay the same). One thread, not one per stream: each
//   wake costs the CPU it is meant to save, and the calls of both directions share the wake.
// - spinning: as polling, without the sleeps: a call runs within a query's time of its event
//   firing, for a CPU core kept busy while any call waits.
//
// Thread-safety: add() and add_after() from any thread. Calls on a stream queue in the order they
// were added; add() records its event as it queues, so that is the order of the events on the
// stream, while add_after() queues an event recorded earlier: a caller that mixes them on a stream
// adds from one thread, in the order it recorded. The calls run on the watcher's threads, one at a
// time per thread; they must be quick (polling or spinning, one thread runs every stream's calls:
// a slow one holds up all of them) and must not call CUDA on the same stream synchronously. add()
// and add_after() throw Error, having queued nothing, when a thread cannot be started.
#pragma once

#include <cuda_runtime.h>

#include "dma/copy_engine.h"

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
  // Asleep: streams get threads of their own up to this many; later ones share theirs, whose calls
  // then also wait for the calls queued before them there (events of another stream included:
  // a caller that holds a stream until a call on another has run must stay under the limit).
  static constexpr size_t kMaxQueues = 4;
  // Polling and spinning: streams get queues of their own up to this many (a queue costs the
  // thread one query per round while it holds a call), shared alike beyond.
  static constexpr size_t kMaxAskedQueues = 64;

  // Spinning: CPU pause instructions between rounds of queries (about a microsecond on current
  // x86), so that the queries leave the driver's context lock to the thread launching copies.
  static constexpr int kSpinPauses = 16;

  // spin: ask back to back (poll_ns is then not read). Otherwise poll_ns: 0, wait asleep on each
  // event; > 0, ask the events that often (see above).
  CompletionWatcher(int device, int64_t poll_ns, bool spin)
      : device_(device), poll_ns_(spin ? 0 : poll_ns), spin_(spin) {}
  // Runs every call still queued, each after its event, then stops the threads.
  ~CompletionWatcher();
  CompletionWatcher(const CompletionWatcher&) = delete;
  CompletionWatcher& operator=(const CompletionWatcher&) = delete;

  // Records an event on `stream` and queues fn(context) behind it. Throws Error, having queued
  // nothing, when the event cannot be created or recorded (or a thread started).
  void add(cudaStream_t stream, Call fn, void* context);
  // As add(), behind `recorded`, an event of the caller's already recorded on `stream` (after the
  // events of the calls queued there before): it stays the caller's, unchanged, and must outlive the
  // call. Asleep, an event of the watcher's is recorded on `stream` now instead (the caller's may
  // not be blocking-sync, and a thread would then spin on it).
  void add_after(cudaStream_t stream, cudaEvent_t recorded, Call fn, void* context);

  // True when one thread asks every stream's events (polling or spinning), false when each stream's
  // thread sleeps on them.
  bool asks() const { return spin_ || poll_ns_ > 0; }

 private:
  struct Pending {
    cudaEvent_t event;
    Call fn;
    void* context;
    bool borrowed;  // the caller's (add_after): not the watcher's to reuse
  };
  struct Queue {
    cudaStream_t stream = nullptr;  // the first stream that used it
    std::deque<Pending> pending;
    std::condition_variable wake;  // asleep: this queue's thread waits here for calls
    std::thread thread;            // asleep: the queue's own thread
  };

  // Under mutex_, held by `lock`: queues `pending`, drops the lock and wakes the thread that serves it.
  void queue_locked(cudaStream_t stream, const Pending& pending, std::unique_lock<std::mutex>& lock);
  Queue& queue_for(cudaStream_t stream);  // under mutex_; starts the thread that serves it when new
  cudaEvent_t take_event();               // under mutex_
  void prepare_thread() const;            // on a watcher thread, before it waits for events
  void sleep_on_events(Queue& queue);     // asleep: one stream's thread
  void ask_events();                      // polling or spinning: the one thread for every stream
  // Under mutex_, the lock held by `lock`: asks the oldest event of `queue` and, while the oldest
  // has fired (or failed), runs its call with the lock dropped and takes it off. True when one ran.
  bool run_fired(Queue& queue, std::unique_lock<std::mutex>& lock);
  void finish(Queue& queue, const Pending& done, bool fired);  // runs the call, then takes it off

  const int device_;
  const int64_t poll_ns_;
  const bool spin_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::condition_variable asker_wake_;  // polling or spinning: the asking thread waits here for calls
  std::thread asker_;
  std::vector<cudaEvent_t> spare_events_;
  bool stopping_ = false;
};

}  // namespace hugepin
