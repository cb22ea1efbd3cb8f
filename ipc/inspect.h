// The inspector: what every arena on the machine holds and does, read from control segments
// without a lock and without a single write (segments are mapped PROT_READ from O_RDONLY
// descriptors). A corrupt or truncated segment gives a message, never a crash; a segment the
// caller may not read gives a message too, and the other arenas are still shown.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/os.h"
#include "hugemem/backing.h"
#include "ipc/control_segment.h"
#include "ipc/scheduler_counters.h"

namespace hugepin {

struct RankSnapshot {
  uint32_t rank = 0;  // flat: pp_rank * tp + tp_rank
  uint32_t tp_rank = 0;
  uint32_t pp_rank = 0;
  int node_requested = -1;
  int node_obtained = -1;
  uint64_t page_size = 0;
  uint64_t bytes = 0;
  uint64_t payload_bytes_per_block = 0;
  uint64_t chunk_count = 0;
  std::string backing_path;
  RankStatus status;         // attached pid, whether it is alive, state, heartbeat, takeovers
  uint32_t ring_capacity = 0;
  uint32_t ring_depth = 0;   // reports waiting for the scheduler
  uint64_t reports_posted = 0;
  uint64_t reports_consumed = 0;
};

struct ArenaSnapshot {
  std::string name;
  std::string path;  // the segment file
  uid_t owner_uid = 0;
  gid_t owner_gid = 0;
  mode_t mode = 0;
  SegmentHeader header;
  uint64_t generation = 0;
  bool creator_alive = false;
  pid_t scheduler_pid = 0;  // the process that holds (or last held) the scheduler role; 0: none
  bool scheduler_alive = false;
  SchedulerReading scheduler;  // pinned chunks, jobs waiting for quorum, ... (0 until written)
  uint64_t plan_bytes = 0;
  std::vector<RankSnapshot> ranks;
  int64_t taken_ns = 0;  // CLOCK_MONOTONIC when read
};

// Reads what a parsed segment holds now. Loads only.
ArenaSnapshot snapshot_segment(Os& os, const ParsedSegment& view);

// Opens arena `name`'s segment read-only and reads it. Throws Error: no such arena, access
// refused, corrupt.
ArenaSnapshot inspect_arena(Os& os, std::string_view name);

struct InspectEntry {
  std::string name;
  std::optional<ArenaSnapshot> snapshot;  // when the segment could be read
  std::string error;                      // otherwise, why not (one line)
};

// Every arena on the machine, by name: each control segment in /dev/shm, read or with its error,
// and arenas with data files but no segment (error "no control segment ...").
std::vector<InspectEntry> inspect_arenas(Os& os, const ArenaOptions& where = {});

// Reports per second posted to each rank's ring from `before` to `after`; empty when the two are
// not the same arena (name, creation time and rank count must agree) or no time passed.
std::vector<double> ring_rates(const ArenaSnapshot& before, const ArenaSnapshot& after);

}  // namespace hugepin
