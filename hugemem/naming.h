// Where an arena's files live. One naming scheme, so that `arena list` and `destroy` find
// everything any process (or a crash) left behind.
//
//   <hugetlbfs mount>/hugepin/<arena>/rank-<r>   a region on hugepages
//   <shm dir>/hugepin/<arena>/rank-<r>           a region on 4 KiB shared memory (the fallback)
//   <shm dir>/hugepin.<arena>                    the control segment (ipc/)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/arena_limits.h"
#include "base/trusted_file.h"

namespace hugepin {

inline constexpr std::string_view kDataDirName = "hugepin";
inline constexpr std::string_view kDefaultShmDir = "/dev/shm";
inline constexpr size_t kMaxArenaNameLength = 64;
// Most ranks an arena may have (kMaxArenaRanks): base/arena_limits.h, which the planner shares.

// True for 1-64 characters of [A-Za-z0-9._-] not starting with '.'.
bool is_valid_arena_name(std::string_view name);
// Throws Error naming `name` when it is not valid.
void check_arena_name(std::string_view name);

// Each arena's control segment (ipc/control_segment.h): Boost's shm_open puts "hugepin.<arena>"
// in /dev/shm, whatever the arena's data directory.
inline constexpr std::string_view kControlSegmentDir = "/dev/shm";
std::string control_segment_name(std::string_view arena);  // "hugepin.<arena>"
std::string control_segment_path(std::string_view arena);  // "/dev/shm/hugepin.<arena>"
// The arena a /dev/shm file name belongs to ("hugepin.kv" -> "kv"), or "" when it is not one.
std::string arena_of_segment_file(std::string_view file_name);

std::string arena_data_dir(std::string_view root_dir, std::string_view arena);
// How arena files are opened (base/trusted_file.h): to be used (mapped, written, made), or only
// shown in a listing.
inline constexpr FileRule kRegionFileRule{FileType::kRegular, FileOwners::kTrusted, "region file"};
inline constexpr FileRule kListedRegionRule{FileType::kRegular, FileOwners::kAny, "region file"};
inline constexpr FileRule kArenaDirRule{FileType::kDirectory, FileOwners::kTrusted, "arena directory"};
inline constexpr FileRule kListedArenaDirRule{FileType::kDirectory, FileOwners::kAny, "arena directory"};

// The same as paths base/trusted_file.h opens: the root as given, the rest checked on the way.
TrustedPath arena_data_location(std::string_view root_dir, std::string_view arena);
TrustedPath region_location(std::string_view root_dir, std::string_view arena, uint32_t rank);
std::string region_file_name(uint32_t rank);
// The rank of a region file name ("rank-3" -> 3), or nullopt.
std::optional<uint32_t> parse_region_file_name(std::string_view file_name);

}  // namespace hugepin
