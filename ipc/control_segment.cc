#include "ipc/control_segment.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/contract.h"
#include "base/error.h"
#include "base/size.h"
#include "base/trusted_file.h"
#include "hugemem/naming.h"
#include "ipc/owner_word.h"

namespace hugepin {
namespace {


// True when [offset, offset + length) lies inside [0, size), without overflow.
bool inside(uint64_t offset, uint64_t length, uint64_t size) { return offset <= size && length <= size - offset; }

// Where the ControlBlock is: the first 128-byte boundary in the scan window whose magic and
// self-offset agree.
const ControlBlock* find_control_block(const std::byte* data, size_t size) {
  for (uint64_t offset = 0; offset < kControlScanBytes && inside(offset, sizeof(ControlBlock), size);
       offset += alignof(ControlBlock)) {
    const auto* block = reinterpret_cast<const ControlBlock*>(data + offset);
    // Acquire pairs with the release store of `magic` that ends create_control_segment.
    if (block->magic.load(std::memory_order_acquire) == kControlMagic && block->self_offset == offset) return block;
  }
  return nullptr;
}

std::string bounded_string(const char* chars, size_t capacity, std::string_view what) {
  const void* nul = std::memchr(chars, '\0', capacity);
  if (nul == nullptr) throw Error(cat("control segment: ", what, " is not terminated within ", capacity, " bytes"));
  return std::string(chars, static_cast<const char*>(nul) - chars);
}

SegmentHeader read_header(const ControlBlock& block, size_t size) {
  SegmentHeader header;
  header.layout_version = block.layout_version;
  if (header.layout_version != kControlLayoutVersion) {
    throw LayoutVersionError(cat("control segment has layout version ", header.layout_version, ", this hugepin reads version ",
                    kControlLayoutVersion, ": use the hugepin that created it, or destroy and re-create the arena"));
  }
  if (block.block_bytes != sizeof(ControlBlock)) {
    throw Error(cat("control segment: control block is ", block.block_bytes, " bytes, expected ", sizeof(ControlBlock)));
  }
  header.segment_bytes = block.segment_bytes;
  if (header.segment_bytes != size) {
    throw Error(cat("control segment is ", size, " bytes, its header says ", header.segment_bytes, " (truncated?)"));
  }
  header.arena = bounded_string(block.arena, kArenaNameBytes, "the arena name");
  if (!is_valid_arena_name(header.arena)) throw Error(cat("control segment: arena name '", header.arena, "' is not valid"));
  header.creator_pid = block.creator_pid;
  header.creator_uid = block.creator_uid;
  header.creator_start_ticks = block.creator_start_ticks;
  header.created_realtime_ns = block.created_realtime_ns;
  header.tp = block.tp;
  header.pp = block.pp;
  header.rank_count = block.rank_count;
  header.ring_capacity = block.ring_capacity;
  header.blocks_per_chunk = block.blocks_per_chunk;
  header.chunk_count = block.chunk_count;
  if (header.tp == 0 || header.pp == 0 || uint64_t{header.tp} * header.pp != header.rank_count ||
      header.rank_count > kMaxArenaRanks) {
    throw Error(cat("control segment: tp ", header.tp, " x pp ", header.pp, " does not give its ", header.rank_count,
                    " ranks"));
  }
  if (ReportRing::memsize(header.ring_capacity) == 0) {
    throw Error(cat("control segment: ring capacity ", header.ring_capacity, " is not a power of two in range"));
  }
  return header;
}

// Checks that `count` objects of `bytes` each at `offset` lie inside the image, aligned.
void check_span(std::string_view what, uint64_t offset, uint64_t count, uint64_t bytes, size_t size) {
  if (offset % kCacheLinePair != 0 || (count != 0 && bytes > size / count) || !inside(offset, count * bytes, size)) {
    throw Error(cat("control segment: ", what, " at offset ", offset, " (", count, " x ", bytes,
                    " bytes) is misaligned or outside the ", size, "-byte segment"));
  }
}

void check_region(const ParsedSegment& view, uint32_t rank, const std::byte* data, size_t size,
                  std::vector<const ReportRing*>& rings, std::vector<std::string_view>& paths) {
  const RegionRecord& record = view.regions[rank];
  const SegmentHeader& header = view.header;
  if (record.rank != rank || record.tp_rank >= header.tp || record.pp_rank >= header.pp ||
      record.pp_rank * header.tp + record.tp_rank != rank) {
    throw Error(cat("control segment: region record ", rank, " names rank ", record.rank, " (tp ", record.tp_rank,
                    ", pp ", record.pp_rank, ")"));
  }
  if (record.page_size == 0 || (record.page_size & (record.page_size - 1)) != 0) {
    throw Error(cat("control segment: rank ", rank, " has page size ", record.page_size));
  }
  const void* nul = std::memchr(record.backing_path, '\0', kBackingPathBytes);
  if (nul == nullptr) throw Error(cat("control segment: rank ", rank, " has an unterminated backing path"));
  paths.emplace_back(record.backing_path, static_cast<const char*>(nul) - record.backing_path);
  if (record.ring_bytes != ReportRing::memsize(header.ring_capacity)) {
    throw Error(cat("control segment: rank ", rank, " has a ring of ", record.ring_bytes, " bytes, expected ",
                    ReportRing::memsize(header.ring_capacity)));
  }
  const ReportRing* ring = ReportRing::attach_read_only(data, size, record.ring_offset);
  if (ring->capacity() != header.ring_capacity || &ring->data_doorbell() != view.doorbell) {
    throw Error(cat("control segment: the ring of rank ", rank, " does not match the header"));
  }
  rings.push_back(ring);
}

std::string user_name(uid_t uid) {
  passwd entry{};
  passwd* found = nullptr;
  char buffer[1024];
  if (getpwuid_r(uid, &entry, buffer, sizeof buffer, &found) == 0 && found != nullptr) return found->pw_name;
  return "";
}

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

}  // namespace

std::string_view rank_state_name(uint8_t state) {
  switch (static_cast<RankState>(state)) {
    case RankState::kCreated: return "created";
    case RankState::kAttached: return "attached";
    case RankState::kPinning: return "pinning";
    case RankState::kReady: return "ready";
    case RankState::kDetached: return "detached";
    case RankState::kDead: return "dead";
  }
  return "unknown";
}

ParsedSegment parse_segment(const std::byte* data, size_t size) {
  HUGEPIN_REQUIRE(reinterpret_cast<uintptr_t>(data) % kCacheLinePair == 0, "data at ", static_cast<const void*>(data));
  if (size < sizeof(ControlBlock)) {
    throw Error(cat("control segment is ", size, " bytes: too short to hold a control block (truncated?)"));
  }
  const ControlBlock* block = find_control_block(data, size);
  if (block == nullptr) {
    throw Error(cat("no control block in the first ", format_bytes(kControlScanBytes),
                    " of the segment: not a hugepin control segment, corrupt, or still being created"));
  }
  ParsedSegment view;
  view.block = block;
  view.header = read_header(*block, size);
  const SegmentHeader& header = view.header;
  if (block->region_record_bytes != sizeof(RegionRecord)) {
    throw Error(cat("control segment: region records are ", block->region_record_bytes, " bytes, expected ",
                    sizeof(RegionRecord)));
  }
  check_span("the doorbell", block->doorbell_offset, 1, sizeof(Doorbell), size);
  check_span("the report gate", block->gate_offset, 1, sizeof(ReportGate), size);
  check_span("the region records", block->regions_offset, header.rank_count, sizeof(RegionRecord), size);
  check_span("the scheduler counters", block->counters_offset, 1, sizeof(SchedulerCounters), size);
  if (block->plan_bytes > kMaxPlanJsonBytes || !inside(block->plan_offset, block->plan_bytes, size)) {
    throw Error(cat("control segment: the plan (", block->plan_bytes, " bytes at offset ", block->plan_offset,
                    ") is outside the segment"));
  }
  view.doorbell = reinterpret_cast<const Doorbell*>(data + block->doorbell_offset);
  view.gate = reinterpret_cast<const ReportGate*>(data + block->gate_offset);
  view.regions = reinterpret_cast<const RegionRecord*>(data + block->regions_offset);
  view.counters = reinterpret_cast<const SchedulerCounters*>(data + block->counters_offset);
  view.plan_json = std::string_view(reinterpret_cast<const char*>(data + block->plan_offset), block->plan_bytes);
  for (uint32_t rank = 0; rank < header.rank_count; ++rank) check_region(view, rank, data, size, view.rings, view.backing_paths);
  return view;
}

void check_segment_access(std::string_view arena, const struct stat& file, SegmentAccess access) {
  const uid_t me = geteuid();
  if (me == 0 || file.st_uid == me) return;
  const bool writing = access == SegmentAccess::kReadWrite;
  const mode_t group_bits = writing ? 0060 : 0040;
  if ((file.st_mode & group_bits) == group_bits && process_in_group(file.st_gid)) return;
  if (!writing && (file.st_mode & 0004) != 0) return;
  std::string owner = user_name(file.st_uid);
  throw Error(cat("arena '", arena, "' belongs to uid ", file.st_uid, owner.empty() ? "" : cat(" (", owner, ")"),
                  " with mode ", mode_text(file.st_mode), ": only that user",
                  (file.st_mode & group_bits) == group_bits ? cat(", root or members of group ", file.st_gid)
                                                            : std::string(" or root"),
                  " may ", writing ? "attach to" : "read", " it"),
              EACCES);
}

ControlSegment ControlSegment::open(Os& os, std::string_view arena, SegmentAccess access) {
  check_arena_name(arena);
  return open_at(os, {std::string(kControlSegmentDir), control_segment_name(arena)}, access, arena);
}

ControlSegment ControlSegment::open_file(Os& os, const std::string& path, SegmentAccess access, std::string_view arena) {
  return open_at(os, user_named(path), access, arena);
}

ControlSegment ControlSegment::open_at(Os& os, const TrustedPath& where, SegmentAccess access, std::string_view arena) {
  const std::string path = where.full();
  const bool writable = access == SegmentAccess::kReadWrite;
  // Read-only, anyone's segment may be shown; one this process writes must be trusted
  // (base/trusted_file.h). Either way no link is followed and no FIFO opened.
  const FileRule rule{FileType::kRegular, writable ? FileOwners::kTrusted : FileOwners::kAny, "control segment"};
  ControlSegment segment;
  try {
    // O_PATH needs no permission on the file: the owner and mode are known before access is.
    segment.file_ = open_trusted(os, where, O_PATH, rule).status;
  } catch (const Error& error) {
    if (error.errno_value() != ENOENT) throw;
    const std::string name = arena.empty() ? path : cat("arena '", arena, "'");
    throw Error(cat(name, " has no control segment (", path, "): hugepin arena list shows the arenas"), ENOENT);
  }
  check_segment_access(arena.empty() ? path : arena, segment.file_, access);

  TrustedFile file = open_trusted(os, where, writable ? O_RDWR : O_RDONLY, rule);
  segment.file_ = file.status;
  const auto size = static_cast<uint64_t>(segment.file_.st_size);
  if (size < sizeof(ControlBlock)) {
    throw Error(cat("control segment ", path, " is ", size, " bytes: too short to hold a control block (truncated?)"));
  }
  void* data = nullptr;
  if (int rc = os.mmap(size, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, file.fd.get(), 0, &data); rc < 0) {
    throw_errno(cat("cannot map control segment ", path), -rc);
  }
  segment.mapping_ = MappedRegion(os, path, file.fd.release(), data, size, 4 * kKiB);
  segment.guard_ = TruncationGuard(data, size);
  segment.access_ = access;
  try {
    segment.view_ = parse_segment(segment.mapping_.data(), size);
    segment.check_intact();
  } catch (const LayoutVersionError& error) {
    throw LayoutVersionError(cat(path, ": ", error.what()));
  } catch (const Error& error) {
    throw Error(cat(path, ": ", error.what()), error.errno_value());
  }
  return segment;
}

void ControlSegment::check_intact() const {
  if (!guard_.truncated()) return;
  throw Error(cat("control segment ", path(), " was truncated under this process (another process with write access to it "
                  "shrank it): its records and rings are gone; stopping (hugepin arena destroy ", view_.header.arena,
                  " and create it again)"),
              EIO);
}

void ControlSegment::require_writable() const {
  if (access_ != SegmentAccess::kReadWrite) throw Error(cat("control segment ", path(), " is open read-only"));
}

RegionRecord& ControlSegment::region(uint32_t rank) {
  HUGEPIN_REQUIRE(rank < view_.header.rank_count, "rank ", rank, " of ", view_.header.rank_count);
  require_writable();
  return const_cast<RegionRecord&>(view_.regions[rank]);
}

ReportRing& ControlSegment::ring(uint32_t rank) {
  HUGEPIN_REQUIRE(rank < view_.header.rank_count, "rank ", rank, " of ", view_.header.rank_count);
  require_writable();
  return const_cast<ReportRing&>(*view_.rings[rank]);
}

Doorbell& ControlSegment::doorbell() {
  require_writable();
  return const_cast<Doorbell&>(*view_.doorbell);
}

ReportGate& ControlSegment::gate() {
  require_writable();
  return const_cast<ReportGate&>(*view_.gate);
}

SchedulerCounters& ControlSegment::scheduler_counters() {
  require_writable();
  return const_cast<SchedulerCounters&>(*view_.counters);
}

ControlBlock& ControlSegment::block() {
  require_writable();
  return const_cast<ControlBlock&>(*view_.block);
}

RankStatus read_rank_status(Os& os, const RegionRecord& record) {
  RankStatus status;
  // Acquire pairs with the release compare-and-swap of `owner` in attach and detach.
  status.owner = record.owner.load(std::memory_order_acquire);
  status.pid = owner_pid(status.owner);
  status.alive = owner_alive(os, status.owner);
  // Acquire pairs with the release compare-and-swap in update_status (rank_attachment.cc).
  const uint64_t packed = record.status.load(std::memory_order_acquire);
  status.state = status_state(packed);
  status.attach_generation = status_generation(packed);
  status.heartbeat_ns = record.heartbeat_ns.load(std::memory_order_relaxed);
  status.takeovers = record.takeovers.load(std::memory_order_relaxed);
  status.pinned_bytes = record.pinned_bytes.load(std::memory_order_relaxed);
  return status;
}

namespace {

// Reads `bytes` at `offset` of `fd` whole, or throws.
void pread_all(Os& os, int fd, void* data, size_t bytes, uint64_t offset) {
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = os.pread(fd, static_cast<std::byte*>(data) + done, bytes - done, offset + done);
    if (n == -EINTR) continue;
    if (n < 0) throw_errno("cannot read the control segment", static_cast<int>(-n));
    if (n == 0) throw Error(cat("control segment ends at ", offset + done, " bytes, before its header says (truncated?)"));
    done += static_cast<size_t>(n);
  }
}

// Whole cache-line pairs: a buffer the control block can be read from in place.
struct alignas(kCacheLinePair) LinePair {
  std::byte bytes[kCacheLinePair];
};

}  // namespace

RankRecordReading read_rank_record(Os& os, int fd, uint64_t size, uint32_t rank) {
  const uint64_t window = std::min<uint64_t>(size, kControlScanBytes);
  std::vector<LinePair> head((window + kCacheLinePair - 1) / kCacheLinePair);
  pread_all(os, fd, head.data(), window, 0);
  const ControlBlock* block = find_control_block(reinterpret_cast<const std::byte*>(head.data()), window);
  if (block == nullptr) {
    throw Error(cat("no control block in the first ", format_bytes(kControlScanBytes),
                    " of the segment: not a hugepin control segment, corrupt, or still being created"));
  }
  RankRecordReading reading;
  reading.header = read_header(*block, size);
  if (rank >= reading.header.rank_count) {
    throw Error(cat("rank ", rank, " is outside the arena's ", reading.header.rank_count, " ranks"));
  }
  if (block->region_record_bytes != sizeof(RegionRecord)) {
    throw Error(cat("control segment: region records are ", block->region_record_bytes, " bytes, expected ",
                    sizeof(RegionRecord)));
  }
  check_span("the region records", block->regions_offset, reading.header.rank_count, sizeof(RegionRecord), size);
  LinePair copy[sizeof(RegionRecord) / kCacheLinePair];
  pread_all(os, fd, copy, sizeof copy, block->regions_offset + uint64_t{rank} * sizeof(RegionRecord));
  const auto& record = *reinterpret_cast<const RegionRecord*>(copy);
  if (record.rank != rank) throw Error(cat("control segment: region record ", rank, " names rank ", record.rank));
  reading.status = read_rank_status(os, record);
  return reading;
}

bool remove_control_segment(Os& os, std::string_view arena) {
  check_arena_name(arena);
  const std::string path = control_segment_path(arena);
  int rc = os.unlink(path);
  if (rc == -ENOENT) return false;
  if (rc < 0) throw_errno(cat("cannot remove control segment ", path), -rc);
  return true;
}

ArenaLayout segment_layout(const ParsedSegment& view) {
  ArenaLayout layout;
  layout.tp = view.header.tp;
  layout.pp = view.header.pp;
  layout.blocks_per_chunk = view.header.blocks_per_chunk;
  layout.chunk_count = view.header.chunk_count;
  layout.plan_json = std::string(view.plan_json);
  for (uint32_t rank = 0; rank < view.header.rank_count; ++rank) {
    const RegionRecord& record = view.regions[rank];
    layout.ranks.push_back({record.tp_rank, record.pp_rank, record.payload_bytes_per_block, record.bytes,
                            record.node_requested});
  }
  return layout;
}

}  // namespace hugepin
