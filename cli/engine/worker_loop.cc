#include "cli/engine/worker_loop.h"

#include <poll.h>
#include <unistd.h>

#include <chrono>

namespace hugepin::cli {

void run_worker_loop(WorkerSession& session, int channel, WorkerHandler& handler) {
  using Clock = std::chrono::steady_clock;
  pollfd fds[2] = {{channel, POLLIN, 0}, {session.completion_fd(), POLLIN, 0}};
  auto last_heartbeat = Clock::now();
  for (Message message;;) {
    ::poll(fds, 2, 100);  // the timeout paces heartbeats
    uint64_t landed = 0;
    if (::read(fds[1].fd, &landed, sizeof landed) < 0) landed = 0;  // EAGAIN: none landed
    handler.landed();
    while (try_receive(channel, &message)) {
      handler.landed();
      if (message.type == MessageType::kStop) return handler.stop();
      if (message.type == MessageType::kEndStep) handler.end_step(session, message.epoch);
      if (message.type == MessageType::kJob) handler.job(message);
    }
    if (Clock::now() - last_heartbeat > std::chrono::milliseconds(100)) {
      session.heartbeat();
      last_heartbeat = Clock::now();
    }
  }
}

}  // namespace hugepin::cli
