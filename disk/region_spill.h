// A rank region's disk tier: one spill file per KV segment of the region (a segment's host blocks
// are contiguous, so chunk c of segment s is one extent: offset c * its chunk bytes in both the
// segment and its file), and one completion per job over all of them.
//
// Thread-safety: submit() from any thread; the callback runs on an I/O thread. Move-only;
// destruction waits for every job in flight.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/os.h"
#include "disk/spill.h"

namespace hugepin {

struct SegmentSpan {
  std::span<std::byte> bytes;  // the segment's host blocks, inside a mapped region
  uint64_t chunk_bytes = 0;    // blocks_per_chunk * the segment's bytes per block
};

class RegionSpill {
 public:
  // Opens <path_prefix>.seg<s>.spill for every segment (SpillFile::open, `options.chunk_bytes`
  // set per segment). Throws Error as SpillFile::open does.
  RegionSpill(Os& os, const std::string& path_prefix, const std::vector<SegmentSpan>& segments,
              SpillOptions options = {});

  // Queues `op` of `chunks` on every segment's file. `done(error)` runs once, when every file has
  // finished the job: error 0, or the errno of the first chunk that failed. Throws Error, queueing
  // nothing, when a chunk is out of range of any file (ERANGE) or given twice.
  void submit(SpillOp op, const std::vector<uint64_t>& chunks, std::function<void(int error)> done);

  // Removes every file <path_prefix>*: what processes that died left (their files stay behind).
  // An empty prefix removes nothing. Failures are ignored: this is cleanup.
  static void remove_files(const std::string& path_prefix);

 private:
  std::vector<SpillFile> files_;
};

}  // namespace hugepin
