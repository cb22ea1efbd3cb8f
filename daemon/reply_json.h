// The JSON of hugepind's replies about arenas (daemon/protocol.h carries them): one builder per
// thing described. Pure: no Os, no daemon state.
#pragma once

#include <sys/types.h>

#include <string>

#include "daemon/adopt.h"
#include "daemon/protocol.h"
#include "daemon/quarantine.h"
#include "daemon/reaper.h"
#include "ipc/arena_control.h"
#include "ipc/stale_files.h"

namespace hugepin::daemon {

// "0660": a mode as the replies and the log show it.
std::string mode_text(mode_t mode);
// Nanoseconds as seconds.
double seconds(int64_t nanos);

// What a create made: the segment, its mode and group, and each region.
Json created_json(const ArenaCreated& created, const ArenaOptions& options);
// What a destroy of arena `name` removed.
Json destroyed_json(const std::string& name, const ArenaDestroyed& destroyed);
// One arena of the list: its health, owner, workers and how long it has been unowned.
Json arena_state_json(const ArenaState& state);
Json stale_json(const StaleArena& stale);
Json quarantine_json(const QuarantineEntry& entry);

}  // namespace hugepin::daemon
