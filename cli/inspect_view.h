// How the inspector's snapshots are shown: a table for people, JSON for programs (schema in
// docs/inspect.md).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cli/command.h"
#include "ipc/inspect.h"
#include "shim/shim_registry.h"

namespace hugepin::cli {

// Reports per second per rank, by arena name (from ring_rates); an arena without an entry has no
// rates yet (the first sample of --watch, or a single inspect).
using RatesByArena = std::map<std::string, std::vector<double>>;

// The processes that hold ranks through the LD_PRELOAD shim: arena name -> rank -> holder.
using ShimHoldersByArena = std::map<std::string, std::map<uint32_t, ShimHolder>>;

// Holders from `tables` (shim/shim_registry.h) for the ranks of `entries`, each believed only
// while the rank's region file is locked (the shim locks what it maps; a table alone could be
// anyone's claim).
ShimHoldersByArena shim_holders(Os& os, const std::vector<InspectEntry>& entries, const std::vector<ShimTable>& tables,
                                const ArenaOptions& where);

std::string inspect_text(const std::vector<InspectEntry>& entries, const RatesByArena& rates,
                         const ShimHoldersByArena& holders, int64_t now_ns);
Json inspect_json(const std::vector<InspectEntry>& entries, const RatesByArena& rates, const ShimHoldersByArena& holders,
                  int64_t now_ns);

}  // namespace hugepin::cli
