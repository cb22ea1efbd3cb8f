// The manifest of an arena snapshot (DIR/manifest.json): what each data file holds and the
// CRC32C of every chunk. A load trusts nothing the committed manifest does not list.
//
//   { "format": "hugepin-snapshot", "format_version": 1, "layout_version": 1,
//     "arena": "kv", "generation": 3, "created_unix": 1764400000, "plan": null,
//     "regions": [ { "rank": 0, "bytes": 1073741824, "page_size": 2097152,
//                    "chunk_bytes": 2097152, "chunks": 512, "file": "data-3/rank-0.data",
//                    "crc32c": [ 2325822122, ... ] } ] }
//
// layout_version 1: a region's data file holds its bytes at the same offsets, chunk i at
// i * chunk_bytes. `plan` is the arena's plan text when one is known (null otherwise).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hugepin {

inline constexpr int kSnapshotFormatVersion = 1;
inline constexpr int kSnapshotLayoutVersion = 1;

struct RegionManifest {
  uint32_t rank = 0;
  uint64_t bytes = 0;
  uint64_t page_size = 0;  // of the region saved (regions of one arena may differ after a fallback)
  uint64_t chunk_bytes = 0;
  uint64_t chunks = 0;     // ceil(bytes / chunk_bytes)
  std::string file;        // relative to the snapshot directory: data-<generation>/rank-<rank>.data
  std::vector<uint32_t> crc32c;  // one per chunk
};

struct SnapshotManifest {
  int format_version = kSnapshotFormatVersion;
  int layout_version = kSnapshotLayoutVersion;
  std::string arena;
  uint64_t generation = 0;
  int64_t created_unix = 0;
  std::optional<std::string> plan;
  std::vector<RegionManifest> regions;  // by rank
};

// "data-<generation>", the directory of one save's data files; and the file of one region in it.
std::string snapshot_data_dir_name(uint64_t generation);
std::string snapshot_data_file_name(uint64_t generation, uint32_t rank);

std::string manifest_to_json(const SnapshotManifest& manifest);

// Parses and checks a manifest. Throws Error naming `source` and the field at fault when the text
// is not JSON, a field is missing or has the wrong type, a version is unknown, a chunk count or
// CRC list does not match the sizes, a rank repeats, or a file name is not the one its
// generation and rank give (a manifest never points outside its directory).
SnapshotManifest manifest_from_json(std::string_view text, const std::string& source);

}  // namespace hugepin
