#include "daemon/jobs.h"

#include <utility>

#include "base/error.h"

namespace hugepin::daemon {

JobRunner::JobRunner(Os& os) : os_(os) {
  int fd = os.event_fd();
  if (fd < 0) throw_errno("cannot create an eventfd for hugepind's jobs", -fd);
  ready_ = UniqueFd(os, fd);
  thread_ = std::thread([this] { run(); });
}

JobRunner::~JobRunner() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void JobRunner::submit(uint64_t tag, Job job) {
  {
    std::lock_guard lock(mutex_);
    queue_.emplace_back(tag, std::move(job));
    ++pending_;
  }
  wake_.notify_one();
}

std::vector<JobRunner::Done> JobRunner::take_done() {
  uint64_t count = 0;
  os_.read(ready_.get(), &count, sizeof count);  // resets the eventfd; EAGAIN when nothing was added
  std::lock_guard lock(mutex_);
  std::vector<Done> done = std::move(done_);
  done_.clear();
  pending_ -= done.size();
  return done;
}

size_t JobRunner::pending() const {
  std::lock_guard lock(mutex_);
  return pending_;
}

void JobRunner::run() {
  for (;;) {
    std::pair<uint64_t, Job> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and every job has run
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    Json reply = job.second();
    {
      std::lock_guard lock(mutex_);
      done_.push_back({job.first, std::move(reply)});
    }
    const uint64_t one = 1;
    os_.write(ready_.get(), &one, sizeof one);
  }
}

}  // namespace hugepin::daemon
