// Checking arenas, and adopting them when hugepind starts.
//
// check_arena looks at one arena's control segment and data files: the segment must open and
// parse (magic, layout version, every offset in bounds: ControlSegment::open), name the arena it
// is found under, and every rank's region file must be a regular file of the size the segment
// records. adopt_arenas runs it over every arena at start, and then, for each arena:
//
//   consistent      adopted: its generation is bumped (bump_generation), so every process can
//                   tell that a new owner took over; its data is untouched
//   inconsistent    quarantined (daemon/quarantine.h), never deleted; left in place and reported
//                   while younger than the grace (it may be being created)
//   inaccessible    left alone and reported: hugepind may not write it (another user's arena,
//                   not shared with hugepind's group)
//   without data    a segment none of whose files exists: stale (ipc/stale_files.h), left to
//                   the reaper
//
// Thread-safety: free functions.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/os.h"
#include "daemon/quarantine.h"
#include "hugemem/backing.h"

namespace hugepin::daemon {

// kInaccessible: this process cannot judge the arena, so it leaves it alone: no permission, a
// segment of another hugepin layout version, or a system call that failed (EMFILE, ENOMEM...).
// Only kInconsistent (read and found wrong) goes to quarantine.
enum class ArenaHealth { kConsistent, kInconsistent, kInaccessible, kNoData, kNoSegment };

// "consistent", "inconsistent", "inaccessible", "no-data", "no-segment".
std::string_view health_name(ArenaHealth health);

struct ArenaCheck {
  std::string name;
  ArenaHealth health = ArenaHealth::kNoSegment;
  std::string reason;                       // why it is not consistent (one line)
  uid_t owner_uid = 0;                      // the segment file's
  gid_t group_gid = 0;
  mode_t mode = 0;
  int64_t age_ns = 0;                       // since the segment file last changed (ctime)
  std::vector<std::string> recorded_paths;  // region files the segment records, by rank
  uint64_t bytes = 0;                       // their recorded sizes, summed
};

// Checks arena `name`. With `need_write`, a segment this process may not open read-write counts
// as inaccessible (hugepind must write to manage it). Never throws for what it finds: the finding
// is the result.
ArenaCheck check_arena(Os& os, std::string_view name, bool need_write);

struct AdoptOptions {
  ArenaOptions where;          // where data directories are looked for
  std::string prefix;          // only arenas whose names start with this
  int64_t grace_ns = 0;        // inconsistent arenas younger than this are left in place
};

struct AdoptedArena {
  std::string name;
  uint64_t generation = 0;     // after the bump
};

struct AdoptionReport {
  std::vector<AdoptedArena> adopted;
  std::vector<QuarantineEntry> quarantined;
  std::vector<ArenaCheck> left_alone;  // inaccessible, young inconsistent, no data, quarantine failed (reason says)
};

// Adopts every arena with a control segment in scope, as the file comment says. `realtime_ns`
// names quarantine entries.
AdoptionReport adopt_arenas(Os& os, const AdoptOptions& options, int64_t realtime_ns);

}  // namespace hugepin::daemon
