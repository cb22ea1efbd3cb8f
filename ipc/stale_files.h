// Stale files: files that follow the arena naming scheme (hugemem/naming.h and the control
// segment's /dev/shm/hugepin.<arena>) but belong to no usable arena, as crashes and interrupted
// tools leave them:
//
//   data without a segment   <root>/hugepin/<arena>/ (region files or none), no control segment
//   a segment without data   a control segment that parses, none of whose region files exists
//
// One detection for `hugepin arena list --stale` and for hugepind, which removes stale arenas
// only when configured to. It lives in ipc/ because it pairs hugemem's naming with the control
// segment: ipc is the lowest layer that knows both.
//
// A segment that does not parse, or whose region files exist but are wrong, is not stale: it is
// an inconsistent arena, kept as evidence (hugepind quarantines it; daemon/quarantine.h).
//
// Thread-safety: free functions; they read the file system and change nothing but what
// remove_stale_arena removes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/os.h"
#include "hugemem/backing.h"

namespace hugepin {

enum class StaleKind { kDataWithoutSegment, kSegmentWithoutData, kOrphaned };

// "data-without-segment", "segment-without-data", "orphaned".
std::string_view stale_kind_name(StaleKind kind);

struct StaleArena {
  std::string arena;
  StaleKind kind = StaleKind::kDataWithoutSegment;
  std::vector<std::string> paths;  // the data directories, or the segment file
  size_t region_files = 0;         // region files in those directories
  uint64_t bytes = 0;              // the region files' bytes, or the segment's
  uid_t owner = 0;                 // of the first path
  int64_t age_ns = 0;              // since the newest change (ctime) of any of its files
  bool in_use = false;             // a region file is locked by a process that maps it (base/file_locks.h)
};

// Every stale arena whose name starts with `prefix`, looking where list_arenas_with_control
// looks (every hugetlbfs mount, where.hugetlbfs_dir, where.shm_dir, /dev/shm), by name. Young
// and in-use ones are listed too: callers decide (an arena being created has data and no segment
// until its creator finishes).
std::vector<StaleArena> find_stale_arenas(Os& os, const ArenaOptions& where = {}, std::string_view prefix = "");

// Arenas whose processes died holding them (kill -9 of a demo, a crashed engine): a whole arena
// (segment and every region file) whose scheduler role or a rank is still held by a process that
// is gone, with no live worker, scheduler or creator and no region locked by a shim. Their pages
// stay taken until someone destroys them. Listed by `arena list --stale`; never removed here or
// by hugepind's remove_stale (hugepind keeps arenas for their data: its retention decides).
// An arena made by `hugepin arena create` and never used is not orphaned: nobody held it.
std::vector<StaleArena> find_orphaned_arenas(Os& os, const ArenaOptions& where = {}, std::string_view prefix = "");

// Removes the files of stale arena `arena` when it is still stale, not in use and at least
// `min_age_ns` old, checked again now; returns false (removing nothing) when it is not. Throws
// Error naming the file that cannot be removed.
bool remove_stale_arena(Os& os, std::string_view arena, int64_t min_age_ns, const ArenaOptions& where = {});

}  // namespace hugepin
