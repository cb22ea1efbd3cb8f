#include "daemon/jobs.h"

#include <pthread.h>

#include <utility>

#include "base/contract.h"
#include "base/error.h"

namespace hugepin::daemon {

namespace {

// The first signal of `signals` that the calling thread does not block; 0 when it blocks them all.
int first_unblocked(const sigset_t& signals) {
  sigset_t blocked;
  pthread_sigmask(SIG_BLOCK, nullptr, &blocked);
  for (int number = 1; number < NSIG; ++number) {
    if (sigismember(&signals, number) == 1 && sigismember(&blocked, number) != 1) return number;
  }
  return 0;
}

}  // namespace

JobRunner::JobRunner(Os& os, const sigset_t& handled) : os_(os) {
  HUGEPIN_REQUIRE(first_unblocked(handled) == 0, "signal ", first_unblocked(handled), " is not blocked");
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
