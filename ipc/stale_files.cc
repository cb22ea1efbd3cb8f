#include "ipc/stale_files.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <optional>

#include "base/error.h"
#include "base/file_locks.h"
#include "base/file_status.h"
#include "hugemem/arena.h"
#include "hugemem/naming.h"
#include "ipc/control_segment.h"
#include "ipc/inspect.h"

namespace hugepin {
namespace {

int64_t ctime_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec;
}

// Adds `st` to the stale arena's newest-change time (kept in age_ns as a time until the end).
void note_change(StaleArena& stale, const struct stat& st, bool first) {
  if (first) stale.owner = st.st_uid;
  stale.age_ns = std::max(stale.age_ns, ctime_ns(st));
}

// The arena's data directories under every root, with their region files counted.
std::optional<StaleArena> data_without_segment(Os& os, const std::string& arena, const std::vector<std::string>& roots) {
  StaleArena stale;
  stale.arena = arena;
  stale.kind = StaleKind::kDataWithoutSegment;
  for (const std::string& root : roots) {
    const std::string dir = arena_data_dir(root, arena);
    std::optional<struct stat> dir_stat = stat_no_follow(os, dir);
    if (!dir_stat || !S_ISDIR(dir_stat->st_mode)) continue;
    note_change(stale, *dir_stat, stale.paths.empty());
    stale.paths.push_back(dir);
    std::vector<std::string> files;
    if (os.list_data_dir(dir, &files) < 0) continue;
    for (const std::string& file : files) {
      if (!parse_region_file_name(file)) continue;
      const std::string path = cat(dir, "/", file);
      std::optional<struct stat> st = stat_no_follow(os, path);
      if (!st) continue;
      ++stale.region_files;
      stale.bytes += static_cast<uint64_t>(st->st_size);
      note_change(stale, *st, false);
      if (file_is_locked(os, path)) stale.in_use = true;  // the shim locks the region it maps
    }
  }
  if (stale.paths.empty()) return std::nullopt;
  return stale;
}

// The segment when it parses and none of the region files it records exists.
std::optional<StaleArena> segment_without_data(Os& os, const std::string& arena) {
  std::optional<ControlSegment> segment;
  try {
    segment = ControlSegment::open(os, arena, SegmentAccess::kReadOnly);
  } catch (const Error&) {
    return std::nullopt;  // unreadable or corrupt: not ours to call stale
  }
  // The recorded paths are only looked at (no link followed, nothing opened), and can only keep
  // an arena from being called stale: its data may be in a root this listing does not know.
  for (std::string_view path : segment->view().backing_paths) {
    if (stat_no_follow(os, std::string(path))) return std::nullopt;
  }
  std::optional<struct stat> st = stat_no_follow(os, segment->path());
  if (!st) return std::nullopt;
  StaleArena stale;
  stale.arena = arena;
  stale.kind = StaleKind::kSegmentWithoutData;
  stale.paths.push_back(segment->path());
  stale.bytes = static_cast<uint64_t>(st->st_size);
  note_change(stale, *st, true);
  return stale;
}

// Arena names with a data directory under any root, or a control segment, that start with `prefix`.
std::vector<std::string> candidate_names(Os& os, const std::vector<std::string>& roots, std::string_view prefix) {
  std::vector<std::string> names;
  auto add = [&](const std::string& name) {
    if (is_valid_arena_name(name) && std::string_view(name).substr(0, prefix.size()) == prefix) names.push_back(name);
  };
  for (const std::string& root : roots) {
    std::vector<std::string> arenas;
    if (os.list_data_dir(cat(root, "/", kDataDirName), &arenas) == 0) {
      for (const std::string& arena : arenas) add(arena);
    }
  }
  std::vector<std::string> files;
  if (os.list_data_dir(std::string(kControlSegmentDir), &files) == 0) {
    for (const std::string& file : files) add(arena_of_segment_file(file));
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::optional<StaleArena> stale_arena(Os& os, const std::string& arena, const std::vector<std::string>& roots,
                                      int64_t now_ns) {
  std::optional<StaleArena> stale;
  if (stat_no_follow(os, control_segment_path(arena))) {
    // A segment with data anywhere under the roots is an arena (or an inconsistent one), not stale.
    if (!data_without_segment(os, arena, roots)) stale = segment_without_data(os, arena);
  } else {
    stale = data_without_segment(os, arena, roots);
  }
  if (stale) stale->age_ns = std::max<int64_t>(0, now_ns - stale->age_ns);
  return stale;
}

// Arena `arena` when its every role is held by dead processes and at least one is held at all.
std::optional<StaleArena> orphaned_arena(Os& os, const std::string& arena, const ArenaOptions& where, int64_t now_ns) {
  ArenaSnapshot snapshot;
  try {
    snapshot = inspect_arena(os, arena);
  } catch (const Error&) {
    return std::nullopt;  // unreadable or corrupt: not ours to call orphaned
  }
  if (snapshot.creator_alive || snapshot.scheduler_alive) return std::nullopt;
  bool held_by_the_dead = snapshot.scheduler_pid != 0;  // a scheduler gives its role back when it stops
  StaleArena orphan;
  orphan.arena = arena;
  orphan.kind = StaleKind::kOrphaned;
  orphan.paths.push_back(snapshot.path);
  orphan.owner = snapshot.owner_uid;
  orphan.age_ns = std::max<int64_t>(0, now_ns - snapshot.header.created_realtime_ns);
  for (const RankSnapshot& rank : snapshot.ranks) {
    if (rank.status.alive) return std::nullopt;
    held_by_the_dead = held_by_the_dead || rank.status.owner != 0;  // a worker gives its rank back at detach
    std::optional<RegionFile> region = find_region(os, arena, rank.rank, where);
    if (!region) return std::nullopt;  // part of the data is gone: not a whole arena
    if (file_is_locked(os, region->path)) return std::nullopt;  // a shim maps it
    ++orphan.region_files;
    orphan.bytes += region->bytes;
  }
  if (!held_by_the_dead) return std::nullopt;
  return orphan;
}

// What `look(arena, roots, now)` finds for each arena name under the roots of `where`.
template <typename Look>
std::vector<StaleArena> each_candidate(Os& os, const ArenaOptions& where, std::string_view prefix, Look look) {
  const std::vector<std::string> roots = arena_data_roots(os, where);
  const int64_t now = os.realtime_ns();
  std::vector<StaleArena> found;
  for (const std::string& arena : candidate_names(os, roots, prefix)) {
    if (std::optional<StaleArena> stale = look(arena, roots, now)) found.push_back(std::move(*stale));
  }
  return found;
}

}  // namespace

std::string_view stale_kind_name(StaleKind kind) {
  switch (kind) {
    case StaleKind::kDataWithoutSegment: return "data-without-segment";
    case StaleKind::kSegmentWithoutData: return "segment-without-data";
    case StaleKind::kOrphaned: return "orphaned";
  }
  return "unknown";
}

std::vector<StaleArena> find_stale_arenas(Os& os, const ArenaOptions& where, std::string_view prefix) {
  return each_candidate(os, where, prefix, [&](const std::string& arena, const std::vector<std::string>& roots, int64_t now) {
    return stale_arena(os, arena, roots, now);
  });
}

std::vector<StaleArena> find_orphaned_arenas(Os& os, const ArenaOptions& where, std::string_view prefix) {
  return each_candidate(os, where, prefix, [&](const std::string& arena, const std::vector<std::string>&, int64_t now) {
    return orphaned_arena(os, arena, where, now);
  });
}

bool remove_stale_arena(Os& os, std::string_view arena, int64_t min_age_ns, const ArenaOptions& where) {
  check_arena_name(arena);
  const std::vector<std::string> roots = arena_data_roots(os, where);
  std::optional<StaleArena> stale = stale_arena(os, std::string(arena), roots, os.realtime_ns());
  if (!stale || stale->in_use || stale->age_ns < min_age_ns) return false;
  if (stale->kind == StaleKind::kSegmentWithoutData) return remove_control_segment(os, arena);
  // Through descriptors, as destroy does: a link swapped in for a data directory is refused.
  try {
    destroy_arena(os, arena, where);
  } catch (const Error& error) {
    if (error.errno_value() != ENOENT) throw;  // gone meanwhile: nothing left to remove
  }
  return true;
}

}  // namespace hugepin
