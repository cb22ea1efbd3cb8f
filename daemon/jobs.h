// Long requests (create, destroy) run off the daemon's loop, one at a time, in order, so that the
// loop keeps answering other clients, pinging the watchdog and reaping while a create prefaults
// a large arena for minutes.
//
// Thread-safety: submit, take_done and pending from one thread (the loop); each job runs on the
// runner's own thread. Neither copied nor moved: owns a thread (which holds `this`) and an eventfd.
#pragma once

#include <signal.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/os.h"
#include "base/unique_fd.h"
#include "daemon/protocol.h"

namespace hugepin::daemon {

class JobRunner {
 public:
  // A job returns its reply; it must not throw (failures are error replies).
  using Job = std::function<Json()>;
  struct Done {
    uint64_t tag = 0;
    Json reply;
  };

  // Starts the runner's thread. Throws Error when the eventfd cannot be made.
  // REQUIRES: `handled`, the signals the daemon takes through its signalfd, are blocked in the
  // calling thread (the runner's thread inherits the mask, and must not take those signals).
  JobRunner(Os& os, const sigset_t& handled);
  // Runs every job already submitted, then stops the thread.
  ~JobRunner();
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  void submit(uint64_t tag, Job job);
  // Readable while finished jobs wait in take_done.
  int ready_fd() const { return ready_.get(); }
  // The jobs finished since the last call, in order; clears ready_fd.
  std::vector<Done> take_done();
  // Jobs submitted and not yet taken back.
  size_t pending() const;

 private:
  void run();

  Os& os_;
  UniqueFd ready_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::pair<uint64_t, Job>> queue_;
  std::vector<Done> done_;
  size_t pending_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace hugepin::daemon
