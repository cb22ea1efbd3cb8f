// The control segment of an arena: /dev/shm/hugepin.<arena>, laid out as ipc/control_layout.h.
//
// Created once through Boost.Interprocess (create_control_segment, the one place that includes
// it); after that no process calls Boost: every process maps the file itself and parses it with
// parse_segment(), which finds the ControlBlock by its magic and self-offset (not through Boost's
// index, which a crashed process may have left half-updated) and bounds-checks every offset and
// count against the mapping before anything uses it. A corrupt or truncated segment is an Error
// with a message, never a crash.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/os.h"
#include "base/trusted_file.h"
#include "base/truncation_guard.h"
#include "hugemem/arena.h"
#include "hugemem/naming.h"
#include "hugemem/region.h"
#include "ipc/arena_layout.h"
#include "ipc/control_layout.h"
#include "ipc/report_gate.h"
#include "ipc/report_ring.h"
#include "ipc/scheduler_counters.h"

namespace hugepin {

// The segment's name and path: hugemem/naming.h (control_segment_path), which the shim shares.
inline constexpr uint32_t kDefaultRingCapacity = 4096;

// The header's values, copied out of the segment and checked.
// A segment written by a hugepin of another layout version: not corrupt, only not ours to read
// (tools leave it alone; hugepind neither adopts nor quarantines it).
class LayoutVersionError : public Error {
 public:
  using Error::Error;
};

struct SegmentHeader {
  std::string arena;
  uint32_t layout_version = 0;
  uint64_t segment_bytes = 0;
  pid_t creator_pid = 0;
  uid_t creator_uid = 0;
  uint64_t creator_start_ticks = 0;
  int64_t created_realtime_ns = 0;
  uint32_t tp = 0;
  uint32_t pp = 0;
  uint32_t rank_count = 0;
  uint32_t ring_capacity = 0;
  uint64_t blocks_per_chunk = 0;
  uint64_t chunk_count = 0;
};

// A parsed segment image: the checked header and where everything is. Pointers into the image;
// valid while it is.
struct ParsedSegment {
  SegmentHeader header;
  const ControlBlock* block = nullptr;
  const Doorbell* doorbell = nullptr;
  const ReportGate* gate = nullptr;
  const RegionRecord* regions = nullptr;  // header.rank_count records, by flat rank
  const SchedulerCounters* counters = nullptr;
  std::vector<const ReportRing*> rings;   // by flat rank
  std::string_view plan_json;
  std::vector<std::string_view> backing_paths;  // by flat rank
};

// Parses the `size` bytes at `data` as a control segment. Reads only. Throws Error naming what is
// wrong: no control block (not a segment, truncated, or still being created), another layout
// version, an offset or count outside the image, a ring or record that does not check out.
// REQUIRES: data is 128-byte aligned (a mapping is).
ParsedSegment parse_segment(const std::byte* data, size_t size);

enum class SegmentAccess { kReadOnly, kReadWrite };

// Who may open a segment: its owner, root, and, when it is group-shared (0660; 0640 for reading),
// members of its group. Throws Error(EACCES) naming the arena, the owner and the mode otherwise.
void check_segment_access(std::string_view arena, const struct stat& file, SegmentAccess access);

// A mapped control segment: owns the mapping and the descriptor, move-only.
//
// Thread-safety: the mapping is shared memory; what each field tolerates is in control_layout.h.
class ControlSegment {
 public:
  ControlSegment() = default;

  // Maps control segment `arena` (read-only: PROT_READ on an O_RDONLY descriptor; it cannot
  // write). The file is opened as base/trusted_file.h says: a link, a FIFO or another non-regular
  // file is refused, and so, for writing, is a file of an untrusted owner. The mapping is guarded
  // (base/truncation_guard.h): a segment truncated under this process never kills it, see
  // check_intact. Throws Error: no such arena (ENOENT), a refused file (kRefusedErrno), access
  // refused (check_segment_access), corrupt.
  static ControlSegment open(Os& os, std::string_view arena, SegmentAccess access);
  // The same for a segment file at `path` (tests, and images saved for inspection).
  static ControlSegment open_file(Os& os, const std::string& path, SegmentAccess access, std::string_view arena = "");

  const ParsedSegment& view() const { return view_; }
  const SegmentHeader& header() const { return view_.header; }
  const std::string& path() const { return mapping_.path(); }
  uint64_t size() const { return mapping_.size(); }
  uid_t owner_uid() const { return file_.st_uid; }
  gid_t owner_gid() const { return file_.st_gid; }
  mode_t mode() const { return file_.st_mode & 07777; }
  SegmentAccess access() const { return access_; }
  // The segment's descriptor (owned here; for locks: ipc/arena_lock.h).
  int fd() const { return mapping_.fd(); }
  // Throws Error (EIO) naming the segment once it was found truncated under this process: what
  // was read from it since is zeros, not the arena. Callers that loop over the segment (the
  // scheduler, a worker posting reports) call it at each step.
  void check_intact() const;

  // Writable parts. Each throws Error when the segment was opened read-only.
  // REQUIRES: rank < header().rank_count.
  RegionRecord& region(uint32_t rank);
  ReportRing& ring(uint32_t rank);
  Doorbell& doorbell();
  ReportGate& gate();
  SchedulerCounters& scheduler_counters();
  ControlBlock& block();

 private:
  void require_writable() const;
  static ControlSegment open_at(Os& os, const TrustedPath& where, SegmentAccess access, std::string_view arena);

  MappedRegion mapping_;
  TruncationGuard guard_;  // after mapping_: dropped before the mapping goes
  struct stat file_ {};
  SegmentAccess access_ = SegmentAccess::kReadOnly;
  ParsedSegment view_;
};

// The layout a segment records (tp, pp, chunks, each rank's payload, region and node, the plan).
ArenaLayout segment_layout(const ParsedSegment& view);

// A rank's attachment as read from its record at one moment.
struct RankStatus {
  uint64_t owner = 0;  // owner_word() of the worker that holds or last held it; 0: none
  pid_t pid = 0;
  bool alive = false;  // that worker runs (same pid, same start time, not a zombie)
  uint8_t state = 0;   // RankState (anything else in a corrupt segment: rank_state_name says so)
  uint64_t attach_generation = 0;
  int64_t heartbeat_ns = 0;
  uint64_t takeovers = 0;
  uint64_t pinned_bytes = 0;
};

// Reads the attachment fields of `record` (acquire) and checks whether its worker is alive.
RankStatus read_rank_status(Os& os, const RegionRecord& record);

// The header and the attachment of one rank, as read_rank_record copies them.
struct RankRecordReading {
  SegmentHeader header;
  RankStatus status;
};

// Reads the header and rank `rank`'s record of the segment open at `fd` (`size` bytes) with pread
// alone: for a process that must not map a file others may truncate and installs no SIGBUS guard
// (the LD_PRELOAD shim). Checks what parse_segment checks of those parts. Throws Error naming what
// is wrong (not a segment, another layout version, a rank outside the arena, a short read).
RankRecordReading read_rank_record(Os& os, int fd, uint64_t size, uint32_t rank);

// --- creation (control_segment_create.cc: Boost.Interprocess) ---

struct SegmentOptions {
  uint32_t ring_capacity = kDefaultRingCapacity;  // records per rank ring: a power of two
  mode_t mode = 0600;                              // 0660 when a group is given
  std::optional<gid_t> group;
};

// Bytes the segment of `layout` takes (with room for Boost's own bookkeeping).
uint64_t control_segment_bytes(const ArenaLayout& layout, const SegmentOptions& options);

// Creates the control segment of `arena` for `layout`, whose data regions are `regions` (one per
// rank, RegionReport::rank = flat rank). Builds every object in place, records its offset, and
// publishes the magic last. Throws Error (leaving no segment behind): the segment exists, the
// layout (check_layout) or a region does not check out, a backing path is too long, a system call
// fails.
void create_control_segment(Os& os, std::string_view arena, const ArenaLayout& layout,
                            const std::vector<RegionReport>& regions, const SegmentOptions& options);

// Removes the segment file. Returns false when there was none; throws Error on another failure.
bool remove_control_segment(Os& os, std::string_view arena);

}  // namespace hugepin
