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

namespace hugepin {
namespace {

int64_t realtime_ns() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

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

}  // namespace

std::string_view stale_kind_name(StaleKind kind) {
  return kind == StaleKind::kDataWithoutSegment ? "data-without-segment" : "segment-without-data";
}

std::vector<StaleArena> find_stale_arenas(Os& os, const ArenaOptions& where, std::string_view prefix) {
  const std::vector<std::string> roots = arena_data_roots(os, where);
  const int64_t now = realtime_ns();
  std::vector<StaleArena> found;
  for (const std::string& arena : candidate_names(os, roots, prefix)) {
    if (std::optional<StaleArena> stale = stale_arena(os, arena, roots, now)) found.push_back(std::move(*stale));
  }
  return found;
}

bool remove_stale_arena(Os& os, std::string_view arena, int64_t min_age_ns, const ArenaOptions& where) {
  check_arena_name(arena);
  const std::vector<std::string> roots = arena_data_roots(os, where);
  std::optional<StaleArena> stale = stale_arena(os, std::string(arena), roots, realtime_ns());
  if (!stale || stale->in_use || stale->age_ns < min_age_ns) return false;
  if (stale->kind == StaleKind::kSegmentWithoutData) return remove_control_segment(os, arena);
  for (const std::string& dir : stale->paths) {
    std::vector<std::string> files;
    if (int rc = os.list_data_dir(dir, &files); rc < 0 && rc != -ENOENT) throw_errno(cat("cannot list ", dir), -rc);
    for (const std::string& file : files) {
      if (!parse_region_file_name(file)) continue;
      const std::string path = cat(dir, "/", file);
      if (int rc = os.unlink(path); rc < 0 && rc != -ENOENT) throw_errno(cat("cannot remove ", path), -rc);
    }
    if (int rc = os.rmdir(dir); rc < 0 && rc != -ENOENT) {
      throw_errno(cat("cannot remove ", dir, rc == -ENOTEMPTY ? " (it holds files hugepin did not create)" : ""), -rc);
    }
  }
  return true;
}

}  // namespace hugepin
