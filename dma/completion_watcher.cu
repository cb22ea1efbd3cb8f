#include "dma/completion_watcher.h"

#include <cerrno>
#include <chrono>
#include <system_error>

#include "base/cpu_relax.h"
#include "base/os.h"
#include "base/pattern.h"
#include "base/parallel.h"
#include "dma/cuda_check.h"

namespace hugepin {

CompletionWatcher::~CompletionWatcher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  asker_wake_.notify_all();
  for (auto& queue : queues_) queue->wake.notify_all();
  if (asker_.joinable()) asker_.join();
  for (auto& queue : queues_) {
    if (queue->thread.joinable()) queue->thread.join();
  }
  for (cudaEvent_t event : spare_events_) cudaEventDestroy(event);
}

void CompletionWatcher::add(cudaStream_t stream, Call fn, void* context) {
  // Recorded and queued under one hold of the lock: calls on a stream queue in the order of their
  // events there, whichever threads add them.
  std::unique_lock lock(mutex_);
  cudaEvent_t event = take_event();
  const cudaError_t recorded = cudaEventRecord(event, stream);
  if (recorded != cudaSuccess) {
    spare_events_.push_back(event);
    check_cuda(recorded, "recording a completion event");
  }
  try {
    queue_locked(stream, {event, fn, context, /*borrowed=*/false}, lock);
  } catch (...) {
    if (!lock.owns_lock()) lock.lock();
    spare_events_.push_back(event);  // recorded, never queued: free to record again
    throw;
  }
}

void CompletionWatcher::add_after(cudaStream_t stream, cudaEvent_t recorded, Call fn, void* context) {
  if (!asks()) {
    add(stream, fn, context);
    return;
  }
  std::unique_lock lock(mutex_);
  queue_locked(stream, {recorded, fn, context, /*borrowed=*/true}, lock);
}

void CompletionWatcher::queue_locked(cudaStream_t stream, const Pending& pending, std::unique_lock<std::mutex>& lock) {
  Queue& queue = queue_for(stream);
  queue.pending.push_back(pending);
  lock.unlock();
  if (asks()) {
    asker_wake_.notify_one();
  } else {
    queue.wake.notify_one();
  }
}

CompletionWatcher::Queue& CompletionWatcher::queue_for(cudaStream_t stream) {
  for (auto& queue : queues_) {
    if (queue->stream == stream) return *queue;
  }
  const size_t most = asks() ? kMaxAskedQueues : kMaxQueues;
  // Mixed: stream handles are aligned addresses, whose low bits would pick the same few queues.
  if (queues_.size() == most) return *queues_[mix64(reinterpret_cast<uintptr_t>(stream)) % most];
  // The thread first, the queue after: a queue is never left without a thread to serve it.
  auto made = std::make_unique<Queue>();
  made->stream = stream;
  queues_.reserve(queues_.size() + 1);  // the push below cannot throw once a thread runs
  try {
    if (!asks()) {
      made->thread = std::thread([this, queue = made.get()] {
        name_this_thread("hugepin-landed");
        sleep_on_events(*queue);
      });
    } else if (!asker_.joinable()) {
      asker_ = std::thread([this] {
        name_this_thread("hugepin-landed");
        ask_events();
      });
    }
  } catch (const std::system_error& error) {
    throw Error(cat("starting a completion thread: ", error.what()), error.code().value());
  }
  queues_.push_back(std::move(made));
  return *queues_.back();
}

cudaEvent_t CompletionWatcher::take_event() {
  if (!spare_events_.empty()) {
    cudaEvent_t event = spare_events_.back();
    spare_events_.pop_back();
    return event;
  }
  // Only a thread that sleeps on its events needs them blocking-sync. A blocking-sync event has the
  // driver's event thread (cuda-EvtHandlr) woken each time one fires: on the H200 host that thread
  // used 92-228 us of CPU per job of `hugepin bench offload` whose events were only polled.
  const unsigned flags = cudaEventDisableTiming | (asks() ? 0u : cudaEventBlockingSync);
  cudaEvent_t event = nullptr;
  check_cuda(cudaEventCreateWithFlags(&event, flags), "creating a completion event");
  return event;
}

void CompletionWatcher::prepare_thread() const {
  // The runtime's current device is per thread: this one's should be the engine's. An event
  // waits on its own device whatever the current one is, so a failure here changes nothing below.
  (void)cudaSetDevice(device_);
  // A polling thread sleeps tens of microseconds at a time: the kernel's default slack (50 us)
  // would stretch each sleep by more than the sleep itself. A failure leaves the default (slower
  // calls, nothing wrong).
  if (poll_ns_ > 0) (void)real_os().set_timer_slack_ns(kCompletionPollSlackNs);
}

void CompletionWatcher::finish(Queue& queue, const Pending& done, bool fired) {
  // An error (the work before the event failed, or the device is gone) means that work will not
  // run any more: the call runs now, and says so.
  if (!fired) (void)cudaGetLastError();
  done.fn(done.context, fired ? 0 : EIO);
  std::lock_guard lock(mutex_);
  queue.pending.pop_front();
  if (!done.borrowed) spare_events_.push_back(done.event);
}

void CompletionWatcher::sleep_on_events(Queue& queue) {
  prepare_thread();
  std::unique_lock lock(mutex_);
  for (;;) {
    queue.wake.wait(lock, [&] { return stopping_ || !queue.pending.empty(); });
    if (queue.pending.empty()) return;  // stopping, and nothing left to run
    const Pending next = queue.pending.front();
    lock.unlock();
    finish(queue, next, cudaEventSynchronize(next.event) == cudaSuccess);
    lock.lock();
  }
}

bool CompletionWatcher::run_fired(Queue& queue, std::unique_lock<std::mutex>& lock) {
  bool ran = false;
  while (!queue.pending.empty()) {
    // Only this thread takes calls off a queue, so the oldest stays put while the lock is dropped.
    const Pending oldest = queue.pending.front();
    lock.unlock();
    const cudaError_t state = cudaEventQuery(oldest.event);
    if (state == cudaErrorNotReady) {
      lock.lock();
      return ran;
    }
    finish(queue, oldest, state == cudaSuccess);
    lock.lock();
    ran = true;
  }
  return ran;
}

void CompletionWatcher::ask_events() {
  prepare_thread();
  std::unique_lock lock(mutex_);
  for (;;) {
    const auto waiting = [&] {
      for (const auto& queue : queues_) {
        if (!queue->pending.empty()) return true;
      }
      return false;
    };
    asker_wake_.wait(lock, [&] { return stopping_ || waiting(); });
    if (!waiting()) return;  // stopping, and nothing left to run
    bool ran = false;
    // By index: add() may grow queues_ while the lock is dropped (the queues themselves stay put).
    for (size_t i = 0; i < queues_.size(); ++i) ran |= run_fired(*queues_[i], lock);
    if (ran || !waiting()) continue;
    lock.unlock();
    if (spin_) {
      for (int i = 0; i < kSpinPauses; ++i) cpu_relax();
    } else {
      std::this_thread::sleep_for(std::chrono::nanoseconds(poll_ns_));
    }
    lock.lock();
  }
}

}  // namespace hugepin
