#include "dma/completion_watcher.h"

#include <cerrno>
#include <chrono>
#include <functional>

#include "base/os.h"
#include "base/parallel.h"
#include "dma/cuda_check.h"

namespace hugepin {

CompletionWatcher::~CompletionWatcher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  for (auto& queue : queues_) queue->wake.notify_all();
  for (auto& queue : queues_) queue->thread.join();
  for (cudaEvent_t event : spare_events_) cudaEventDestroy(event);
}

void CompletionWatcher::add(cudaStream_t stream, Call fn, void* context) {
  std::unique_lock lock(mutex_);
  cudaEvent_t event = take_event();
  const cudaError_t recorded = cudaEventRecord(event, stream);
  if (recorded != cudaSuccess) {
    spare_events_.push_back(event);
    check_cuda(recorded, "recording a completion event");
  }
  Queue& queue = queue_for(stream);
  queue.pending.push_back({event, fn, context});
  lock.unlock();
  queue.wake.notify_one();
}

CompletionWatcher::Queue& CompletionWatcher::queue_for(cudaStream_t stream) {
  for (auto& queue : queues_) {
    if (queue->stream == stream) return *queue;
  }
  if (queues_.size() == kMaxThreads) return *queues_[std::hash<cudaStream_t>{}(stream) % kMaxThreads];
  queues_.push_back(std::make_unique<Queue>());
  Queue& queue = *queues_.back();
  queue.stream = stream;
  queue.thread = std::thread([this, &queue] {
    name_this_thread("hugepin-landed");
    run(queue);
  });
  return queue;
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
  const unsigned flags = cudaEventDisableTiming | (poll_ns_ > 0 ? 0u : cudaEventBlockingSync);
  cudaEvent_t event = nullptr;
  check_cuda(cudaEventCreateWithFlags(&event, flags), "creating a completion event");
  return event;
}

void CompletionWatcher::run(Queue& queue) {
  // The runtime's current device is per thread: this one's should be the engine's. An event
  // waits on its own device whatever the current one is, so a failure here changes nothing below.
  (void)cudaSetDevice(device_);
  // A polling thread sleeps tens of microseconds at a time: the kernel's default slack (50 us)
  // would stretch each sleep by more than the sleep itself. A failure leaves the default (slower
  // calls, nothing wrong).
  if (poll_ns_ > 0) (void)real_os().set_timer_slack_ns(kPollSlackNs);
  std::unique_lock lock(mutex_);
  for (;;) {
    queue.wake.wait(lock, [&] { return stopping_ || !queue.pending.empty(); });
    if (queue.pending.empty()) return;  // stopping, and nothing left to run
    const Pending next = queue.pending.front();
    lock.unlock();
    // An error (the work before the event failed, or the device is gone) means that work will not
    // run any more: the call runs now, and says so.
    const bool fired = wait_for(next.event);
    if (!fired) (void)cudaGetLastError();
    next.fn(next.context, fired ? 0 : EIO);
    lock.lock();
    queue.pending.pop_front();
    spare_events_.push_back(next.event);
  }
}

bool CompletionWatcher::wait_for(cudaEvent_t event) const {
  if (poll_ns_ <= 0) return cudaEventSynchronize(event) == cudaSuccess;  // asleep until it fires
  for (;;) {
    const cudaError_t state = cudaEventQuery(event);
    if (state != cudaErrorNotReady) return state == cudaSuccess;
    std::this_thread::sleep_for(std::chrono::nanoseconds(poll_ns_));
  }
}

}  // namespace hugepin
