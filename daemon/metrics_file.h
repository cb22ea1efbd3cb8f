// The metrics file for node_exporter's textfile collector: the inspector's exposition of every
// arena hugepind manages (ipc/metrics.h) and hugepind's own figures, written to
// <dir>/hugepin.prom.tmp and renamed to <dir>/hugepin.prom, so that the collector never reads a
// half-written file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/os.h"

namespace hugepin::daemon {

inline constexpr std::string_view kMetricsFileName = "hugepin.prom";

// hugepind's own figures.
struct DaemonFigures {
  bool up = true;               // false in the file written as hugepind stops
  uint64_t requests_ok = 0;
  uint64_t requests_failed = 0;
  uint64_t requests_refused = 0;  // not authorised, busy, oversized
  uint64_t connections = 0;       // open now
  uint64_t arenas = 0;            // managed (with a control segment in scope)
  uint64_t arenas_owned = 0;
  uint64_t quarantined = 0;       // quarantine entries in scope
  uint64_t stale = 0;             // stale arenas in scope
  uint64_t ranks_marked_dead = 0; // totals since start
  uint64_t arenas_expired = 0;
  uint64_t stale_removed = 0;
  int64_t started_realtime_ns = 0;
};

// hugepind's families in the exposition format (hugepind_*), each with # HELP and # TYPE.
std::string daemon_metrics_text(const DaemonFigures& figures);

// Writes `text` to <dir>/hugepin.prom through a temporary file and rename(2). Throws Error naming
// the file that cannot be written.
void write_metrics_file(Os& os, const std::string& dir, std::string_view text);

}  // namespace hugepin::daemon
