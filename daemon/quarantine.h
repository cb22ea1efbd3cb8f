// Quarantine: where hugepind moves an inconsistent arena instead of deleting it. Nothing in
// quarantine is ever removed by hugepin; an operator inspects it and removes it (rm -r) when done.
//
//   /dev/shm/hugepin/.quarantine/<arena>.<UTC time>/control-segment   the segment, when there is one
//   /dev/shm/hugepin/.quarantine/<arena>.<UTC time>/reason            why, and where everything went
//   <root>/hugepin/.quarantine/<arena>.<UTC time>/                    each data directory, moved on
//                                                                     its own file system (rename)
//
// Moving (rename) keeps every byte and every open mapping valid: a process that still maps a
// quarantined region keeps working on it. Names starting with '.' are not arena names, so
// listings of arenas never see the quarantine.
//
// Thread-safety: free functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/os.h"
#include "hugemem/backing.h"

namespace hugepin::daemon {

inline constexpr std::string_view kQuarantineDirName = ".quarantine";

// /dev/shm/hugepin/.quarantine: where every entry's reason is.
std::string quarantine_index_dir();

struct QuarantineEntry {
  std::string arena;
  std::string name;    // "<arena>.<UTC time>"
  std::string path;    // the entry in quarantine_index_dir()
  std::string reason;  // the first line of its reason file
  std::vector<std::string> moved;  // "from -> to" for each file or directory moved
};

// Moves arena `arena`'s control segment (when present) and the data directories `data_dirs`
// (those missing are skipped) into quarantine, and writes the reason file. `realtime_ns` names
// the entry. Throws Error, leaving no entry, when nothing could be moved or the entry cannot be
// made; a directory that cannot be moved (another owner's, in a sticky directory) is named in the
// reason file and left in place.
QuarantineEntry quarantine_arena(Os& os, std::string_view arena, std::string_view reason,
                                 const std::vector<std::string>& data_dirs, int64_t realtime_ns);

// Every quarantine entry whose arena starts with `prefix`, by name.
std::vector<QuarantineEntry> list_quarantine(Os& os, std::string_view prefix = "");

// The data directories of arena `arena`: the directory of each region file its segment records
// (`recorded_paths`) and <root>/hugepin/<arena> under every root of `where`, those that exist.
std::vector<std::string> arena_data_dirs(Os& os, std::string_view arena, const std::vector<std::string>& recorded_paths,
                                         const ArenaOptions& where);

}  // namespace hugepin::daemon
