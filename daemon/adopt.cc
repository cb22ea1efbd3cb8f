#include "daemon/adopt.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "base/error.h"
#include "base/file_status.h"
#include "base/log.h"
#include "ipc/arena_control.h"
#include "ipc/control_segment.h"

namespace hugepin::daemon {
namespace {

// Fills the segment file's owner, mode and age; false when it is gone.
bool stat_segment(Os& os, std::string_view name, ArenaCheck& check) {
  std::optional<struct stat> st = stat_no_follow(os, control_segment_path(name));
  if (!st) return false;
  check.owner_uid = st->st_uid;
  check.group_gid = st->st_gid;
  check.mode = st->st_mode & 07777;
  const int64_t changed = static_cast<int64_t>(st->st_ctim.tv_sec) * 1'000'000'000 + st->st_ctim.tv_nsec;
  check.age_ns = std::max<int64_t>(0, os.realtime_ns() - changed);
  return true;
}

// The first problem with the region files `segment` records; "" when every one checks out.
// Counts the files that exist in *present.
std::string check_region_files(Os& os, const ControlSegment& segment, ArenaCheck& check, size_t* present) {
  std::string problem;
  const ParsedSegment& view = segment.view();
  for (uint32_t rank = 0; rank < view.header.rank_count; ++rank) {
    const std::string path(view.backing_paths[rank]);
    const uint64_t recorded = view.regions[rank].bytes;
    check.recorded_paths.push_back(path);
    check.bytes += recorded;
    std::optional<struct stat> st = stat_no_follow(os, path);
    if (!st) {
      if (problem.empty()) problem = cat("rank ", rank, "'s region file ", path, " is missing");
      continue;
    }
    ++*present;
    if (!problem.empty()) continue;
    if (!S_ISREG(st->st_mode)) {
      problem = cat("rank ", rank, "'s region file ", path, " is not a regular file");
    } else if (static_cast<uint64_t>(st->st_size) != recorded) {
      problem = cat("rank ", rank, "'s region file ", path, " is ", st->st_size, " bytes, the segment records ",
                    recorded);
    }
  }
  return problem;
}

}  // namespace

std::string_view health_name(ArenaHealth health) {
  switch (health) {
    case ArenaHealth::kConsistent: return "consistent";
    case ArenaHealth::kInconsistent: return "inconsistent";
    case ArenaHealth::kInaccessible: return "inaccessible";
    case ArenaHealth::kNoData: return "no-data";
    case ArenaHealth::kNoSegment: return "no-segment";
  }
  return "unknown";
}

ArenaCheck check_arena(Os& os, std::string_view name, bool need_write) {
  ArenaCheck check;
  check.name = std::string(name);
  if (!stat_segment(os, name, check)) {
    check.reason = "no control segment";
    return check;
  }
  std::optional<ControlSegment> segment;
  try {
    segment = ControlSegment::open(os, name, need_write ? SegmentAccess::kReadWrite : SegmentAccess::kReadOnly);
  } catch (const LayoutVersionError& error) {
    // Another hugepin's arena, possibly in use by its processes: not evidence of a crash.
    check.reason = error.what();
    check.health = ArenaHealth::kInaccessible;
    return check;
  } catch (const Error& error) {
    check.reason = error.what();
    // Only a segment that was read and does not parse is inconsistent. A failed system call
    // (EMFILE, ENOMEM, ...) says nothing about the arena: it is left alone, like one this
    // process may not open.
    const int code = error.errno_value();
    check.health = code == ENOENT ? ArenaHealth::kNoSegment
                   : code != 0    ? ArenaHealth::kInaccessible
                                  : ArenaHealth::kInconsistent;
    return check;
  }
  if (segment->header().arena != name) {
    check.health = ArenaHealth::kInconsistent;
    check.reason = cat("the segment names arena '", segment->header().arena, "', not '", name, "'");
    return check;
  }
  size_t present = 0;
  std::string problem = check_region_files(os, *segment, check, &present);
  if (problem.empty()) {
    check.health = ArenaHealth::kConsistent;
  } else if (present == 0) {
    check.health = ArenaHealth::kNoData;
    check.reason = cat("none of its ", check.recorded_paths.size(), " region files exists");
  } else {
    check.health = ArenaHealth::kInconsistent;
    check.reason = problem;
  }
  return check;
}

AdoptionReport adopt_arenas(Os& os, const AdoptOptions& options, int64_t realtime_ns) {
  AdoptionReport report;
  for (const ArenaEntry& entry : list_arenas_with_control(os, options.where)) {
    if (!entry.control || entry.name.compare(0, options.prefix.size(), options.prefix) != 0) continue;
    ArenaCheck check = check_arena(os, entry.name, /*need_write=*/true);
    switch (check.health) {
      case ArenaHealth::kConsistent:
        try {
          ControlSegment segment = ControlSegment::open(os, entry.name, SegmentAccess::kReadWrite);
          report.adopted.push_back({entry.name, bump_generation(segment)});
        } catch (const Error& error) {
          check.health = ArenaHealth::kInconsistent;
          check.reason = cat("changed while being adopted: ", error.what());
          report.left_alone.push_back(std::move(check));
        }
        break;
      case ArenaHealth::kInconsistent:
        if (check.age_ns < options.grace_ns) {
          check.reason += " (younger than the grace: left in place)";
          report.left_alone.push_back(std::move(check));
          break;
        }
        try {
          report.quarantined.push_back(quarantine_arena(
              os, entry.name, check.reason, arena_data_dirs(os, entry.name, check.recorded_paths, options.where),
              realtime_ns));
        } catch (const Error& error) {
          check.reason += cat(" (quarantine failed: ", error.what(), ")");
          report.left_alone.push_back(std::move(check));
        }
        break;
      case ArenaHealth::kInaccessible:
      case ArenaHealth::kNoData:
      case ArenaHealth::kNoSegment:
        report.left_alone.push_back(std::move(check));
        break;
    }
  }
  return report;
}

}  // namespace hugepin::daemon
