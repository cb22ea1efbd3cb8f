// hugepin_worker_options (the C ABI) as the WorkerSessionOptions they ask for. Inline, so that
// capi_test can check the translation without the library exporting it.
#pragma once

#include <cerrno>

#include "base/error.h"
#include "hugepin/hugepin.h"
#include "session/worker_session.h"

namespace hugepin::capi {

// `given` as read (read_options: the fields the caller's struct_size covers, defaults beyond).
// Throws Error (EINVAL) naming the value for a completion_poll_ns it does not know.
inline WorkerSessionOptions worker_session_options(const hugepin_worker_options& given) {
  WorkerSessionOptions options;
  if (given.copy_threads != 0) options.engine.host_threads = given.copy_threads;
  if (given.post_timeout_ns > 0) options.attach.post_timeout_ns = given.post_timeout_ns;
  options.time_copies = given.time_copies != 0;
  options.time_copies_every = given.time_copies_every;
  if (given.completion_poll_ns == HUGEPIN_COMPLETION_SPIN) {
    options.engine.completion_spin = true;
  } else if (given.completion_poll_ns < 0) {
    throw Error(cat("hugepin_worker_options.completion_poll_ns = ", given.completion_poll_ns,
                    ": must be 0 (wait asleep), a poll interval in ns or HUGEPIN_COMPLETION_SPIN (-1)"),
                EINVAL);
  } else {
    options.engine.completion_poll_ns = given.completion_poll_ns;
  }
  return options;
}

}  // namespace hugepin::capi
