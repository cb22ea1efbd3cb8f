// hugepind: the long-lived owner of arenas, so that host KV survives engine and worker restarts.
//
// Start: load the configuration (daemon/config.h) and log the effective options; block SIGTERM,
// SIGINT and SIGHUP into a signalfd; create the socket (daemon/server.h; its lock makes a second
// hugepind on the same socket fail before it touches anything); adopt the arenas it finds
// (daemon/adopt.h: consistent ones get their generation bumped, inconsistent ones are
// quarantined); run a first reaper pass; write the metrics file; send READY=1.
//
// Then one thread polls the signalfd, the socket and its connections, and the job runner's
// eventfd: requests are answered (create and destroy on the job runner, so that a long prefault
// never stalls the loop), the watchdog pinged, the reaper run every reap interval, the metrics
// file rewritten every metrics interval, STATUS= sent when the counts change.
//
// SIGHUP reloads the configuration (everything but the socket and its mode, which need a
// restart); a bad configuration is logged and the running one kept. SIGTERM or SIGINT: STOPPING=1,
// the socket closes, requests in flight finish and their replies are sent, then arenas are kept
// (the default: a restarted daemon adopts them, and no KV data is lost) or, with
// teardown_on_stop, the consistent ones are destroyed.
#pragma once

#include "base/options.h"
#include "base/os.h"
#include "daemon/config.h"

namespace hugepin::daemon {

// Runs hugepind until SIGTERM or SIGINT. Returns the exit status: 0 after a clean stop, 1 when it
// could not start or failed, 2 for a configuration that does not parse. Errors are logged.
int run_daemon(Os& os, const FlagValues& flags, const OptionSource& environment);

}  // namespace hugepin::daemon
