// How the inspector's snapshots are shown: a table for people, JSON for programs (schema in
// README, "Inspector and metrics").
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cli/command.h"
#include "ipc/inspect.h"

namespace hugepin::cli {

// Reports per second per rank, by arena name (from ring_rates); an arena without an entry has no
// rates yet (the first sample of --watch, or a single inspect).
using RatesByArena = std::map<std::string, std::vector<double>>;

std::string inspect_text(const std::vector<InspectEntry>& entries, const RatesByArena& rates, int64_t now_ns);
Json inspect_json(const std::vector<InspectEntry>& entries, const RatesByArena& rates, int64_t now_ns);

}  // namespace hugepin::cli
