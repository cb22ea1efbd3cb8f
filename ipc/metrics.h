// The inspector's figures in the Prometheus text exposition format (version 0.0.4), fit for
// node_exporter's textfile collector: every family has # HELP and # TYPE, its samples together,
// no timestamps. Names start with hugepin_, carry their unit (_bytes, _seconds) and counters end
// in _total. Labels: arena; per rank also rank, tp_rank, pp_rank and node (the node its pages are
// on, "none" when unknown). The names are listed in docs/inspect.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ipc/inspect.h"

namespace hugepin {

// The exposition of `entries`, read at CLOCK_MONOTONIC `now_ns` (for heartbeat ages). An entry
// whose segment could not be read shows as hugepin_arena_up 0 and nothing else.
std::string metrics_text(const std::vector<InspectEntry>& entries, int64_t now_ns);

// A label value escaped for the exposition format (backslash, double quote, newline).
std::string escape_label_value(std::string_view value);

}  // namespace hugepin
