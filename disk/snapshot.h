// Arena snapshots: every region of an arena saved to a directory with a manifest (per-chunk
// CRC32C), and loaded back into an arena of the same shape — so a node comes back after a reboot
// with its KV cache warm.
//
// Layout of a snapshot directory:
//   DIR/manifest.json            the committed manifest (disk/snapshot_manifest.h)
//   DIR/data-<g>/rank-<r>.data   region r's bytes, as saved by generation g (through the spill path)
//   DIR/.lock                    flock: one save, or any number of loads, at a time
//   DIR/.tmp-<pid>/, DIR/.manifest-<pid>.tmp   a save in progress (or one that died)
//
// Crash consistency: a save writes every data file into DIR/.tmp-<pid>/, syncs each file and the
// directory, renames it to DIR/data-<g> (a new name: nothing of the previous snapshot is
// touched), syncs DIR, writes and syncs DIR/.manifest-<pid>.tmp, and renames it over
// DIR/manifest.json: that rename is the commit point. Only then does it remove the previous
// generation. A save killed at any point before the commit leaves the previous snapshot whole
// and loadable; its leftovers are removed by the next save.
//
// Consistency of the data itself: regions are read while saving; writers must be quiet
// (the scheduler's job). A chunk that changed between its checksum and its write fails its
// check at load, so a torn snapshot is refused, never loaded silently.
//
// Thread-safety: free functions; the directory lock serializes saves and loads of one directory
// across processes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/os.h"
#include "disk/snapshot_manifest.h"
#include "disk/spill.h"
#include "hugemem/backing.h"

namespace hugepin {

struct SnapshotOptions {
  // save: the chunk (checksum and I/O unit) to record. load: 0 takes the snapshot's; any other
  // value must equal it.
  uint64_t chunk_bytes = 2 << 20;
  SpillOptions io;                 // path and tuning (its chunk_bytes and open mode are set here)
  ArenaOptions where;              // where the arena's region files are
  std::optional<std::string> plan; // save: recorded; load: compared with the snapshot's when both have one
  // Called after every piece of progress with (bytes done, bytes in all), from the calling thread.
  std::function<void(uint64_t, uint64_t)> progress;
  // Called at each step of a save: "data-written", "data-renamed", "manifest-written",
  // "committed", "cleaned" (tests stop a save there).
  std::function<void(std::string_view)> on_step;
};

struct SnapshotReport {
  std::string arena;
  std::string dir;
  uint64_t generation = 0;
  size_t regions = 0;
  uint64_t bytes = 0;
  uint64_t chunks = 0;
  double seconds = 0;
  std::string backend;     // the spill path's description (rank 0)
  std::string fallback;    // why it is not io_uring + O_DIRECT; "" when it is
  std::vector<std::string> removed;  // leftovers of earlier saves that a save removed
};

// Saves every region of `arena` into `dir` (created when absent, mode 0700). Throws Error naming
// the arena, file, offset and errno when anything fails (a full file system: ENOSPC), after
// removing what this save wrote; the previous snapshot in `dir` stays whole.
SnapshotReport save_snapshot(Os& os, std::string_view arena, const std::string& dir, const SnapshotOptions& options);

// Loads the snapshot in `dir` into `arena`. Before writing anything it refuses, naming the field,
// a snapshot that does not match the arena: other ranks, region sizes, chunk size (when asked),
// layout version, or plan (when both have one). It then reads every chunk into its region and
// checks its CRC32C; a chunk that fails is zero-filled, and after the last chunk it throws Error
// naming the first failed rank and chunk (file, offset, both checksums) and how many failed:
// every other chunk holds the snapshot's bytes.
SnapshotReport load_snapshot(Os& os, std::string_view arena, const std::string& dir, const SnapshotOptions& options);

// The committed manifest of `dir`. Throws Error when there is none or it does not parse.
SnapshotManifest read_snapshot_manifest(Os& os, const std::string& dir);

}  // namespace hugepin
