// A rank process's main loop in the CLI's miniature engines: sleeps until a message arrives on its
// channel or a copy lands (the session's completion descriptor), hands both to its handler, and
// heartbeats every 100 ms, until the scheduler says stop.
#pragma once

#include "cli/engine/channel.h"
#include "session/worker_session.h"

namespace hugepin::cli {

class WorkerHandler {
 public:
  virtual ~WorkerHandler() = default;
  // Copies landed (WorkerSession::take_finished has them). Also runs before every message, so a
  // message may rely on every job whose report reached the scheduler having been seen here.
  virtual void landed() {}
  virtual void job(const Message& message) = 0;
  // The scheduler closed `epoch`; the default posts its compute-release.
  virtual void end_step(WorkerSession& session, Epoch epoch) { session.release(epoch); }
  // Before the loop returns.
  virtual void stop() {}
};

// Runs until a kStop message; throws what the handler or the channel throws.
void run_worker_loop(WorkerSession& session, int channel, WorkerHandler& handler);

}  // namespace hugepin::cli
