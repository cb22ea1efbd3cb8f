// Creating a control segment: the one translation unit that includes Boost.Interprocess.
//
// managed_shared_memory creates and sizes /dev/shm/hugepin.<arena> and hands out aligned
// allocations; each object is then built in place and its offset recorded in the ControlBlock.
// Nothing after creation uses Boost (its segment manager keeps an interprocess mutex that a
// crashed process would leave held), so the segment is closed here and every process, this one
// included, maps the plain file.
#include <fcntl.h>
#include <unistd.h>

#include <boost/interprocess/managed_shared_memory.hpp>
#include <cstring>
#include <new>

#include "base/error.h"
#include "base/process.h"
#include "base/size.h"
#include "base/trusted_file.h"
#include "hugemem/naming.h"
#include "ipc/control_segment.h"

namespace hugepin {
namespace bip = boost::interprocess;
namespace {

// Room for Boost's segment manager, its index and per-allocation headers and alignment.
constexpr uint64_t kBoostOverheadBytes = 16 * kKiB;
constexpr uint64_t kPerAllocationOverhead = 2 * kCacheLinePair;

uint64_t padded(uint64_t bytes) { return (bytes + kCacheLinePair - 1) / kCacheLinePair * kCacheLinePair; }

// Allocations of one segment, each 128-byte aligned, as offsets from the segment's first byte.
class Builder {
 public:
  Builder(bip::managed_shared_memory& segment, uint64_t segment_bytes)
      : segment_(segment),
        // managed_shared_memory keeps the bytes before get_address() for itself (none in Boost
        // 1.74): the file starts get_size() bytes before the end of the mapping.
        base_(static_cast<std::byte*>(segment.get_address()) - (segment_bytes - segment.get_size())) {}

  std::byte* allocate(uint64_t bytes) {
    return static_cast<std::byte*>(segment_.allocate_aligned(padded(bytes), kCacheLinePair));
  }
  uint64_t offset_of(const void* object) const { return static_cast<uint64_t>(static_cast<const std::byte*>(object) - base_); }

 private:
  bip::managed_shared_memory& segment_;
  std::byte* base_;
};

void copy_bounded(char* to, size_t capacity, std::string_view text, std::string_view what) {
  if (text.size() >= capacity) throw Error(cat(what, " '", text, "' is longer than the ", capacity - 1, " bytes a control segment keeps"));
  std::memcpy(to, text.data(), text.size());
  to[text.size()] = '\0';
}

const RegionReport& region_of(const std::vector<RegionReport>& regions, uint32_t rank) {
  for (const RegionReport& region : regions) {
    if (region.rank == rank) return region;
  }
  throw Error(cat("no data region for rank ", rank, " to record in the control segment"));
}

void fill_region(RegionRecord& record, const ArenaLayout& layout, const RankRegionLayout& rank, const RegionReport& region) {
  record.rank = flat_rank_of(layout, rank);
  record.tp_rank = rank.tp_rank;
  record.pp_rank = rank.pp_rank;
  record.node_requested = region.node_requested;
  record.node_obtained = region.placement.majority_node();
  record.page_size = region.placement.page_size != 0 ? region.placement.page_size : 4 * kKiB;
  record.bytes = region.bytes;
  record.payload_bytes_per_block = rank.payload_bytes_per_block;
  record.chunk_count = layout.chunk_count;
  copy_bounded(record.backing_path, kBackingPathBytes, region.path, "backing path");
}

void build(Os& os, bip::managed_shared_memory& segment, uint64_t segment_bytes, std::string_view arena,
           const ArenaLayout& layout, const std::vector<RegionReport>& regions, const SegmentOptions& options) {
  Builder builder(segment, segment_bytes);
  // First allocation: the ControlBlock lands at the start, inside the readers' scan window.
  auto* block = new (builder.allocate(sizeof(ControlBlock))) ControlBlock{};
  block->self_offset = builder.offset_of(block);
  if (block->self_offset >= kControlScanBytes) {
    throw Error(cat("control block landed at offset ", block->self_offset, ", past the ", kControlScanBytes,
                    " bytes readers scan"));
  }
  auto* doorbell = new (builder.allocate(sizeof(Doorbell))) Doorbell;
  auto* gate = new (builder.allocate(sizeof(ReportGate))) ReportGate;
  const auto rank_count = static_cast<uint32_t>(layout.ranks.size());
  auto* records = reinterpret_cast<RegionRecord*>(builder.allocate(uint64_t{rank_count} * sizeof(RegionRecord)));
  for (uint32_t i = 0; i < rank_count; ++i) new (&records[i]) RegionRecord{};
  auto* counters = new (builder.allocate(sizeof(SchedulerCounters))) SchedulerCounters;
  for (const RankRegionLayout& rank : layout.ranks) {
    RegionRecord& record = records[flat_rank_of(layout, rank)];
    fill_region(record, layout, rank, region_of(regions, flat_rank_of(layout, rank)));
    std::byte* ring_memory = builder.allocate(ReportRing::memsize(options.ring_capacity));
    ReportRing::init(ring_memory, options.ring_capacity, doorbell);
    record.ring_offset = builder.offset_of(ring_memory);
    record.ring_bytes = ReportRing::memsize(options.ring_capacity);
    record.status.store(pack_status(0, RankState::kCreated), std::memory_order_relaxed);
  }
  std::byte* plan = builder.allocate(layout.plan_json.size() + 1);
  std::memcpy(plan, layout.plan_json.data(), layout.plan_json.size());

  ProcessIdentity creator = self_identity(os);
  block->layout_version = kControlLayoutVersion;
  block->block_bytes = sizeof(ControlBlock);
  block->segment_bytes = segment_bytes;
  copy_bounded(block->arena, kArenaNameBytes, arena, "arena name");
  block->creator_pid = creator.pid;
  block->creator_uid = geteuid();
  block->creator_start_ticks = creator.start_ticks;
  block->created_realtime_ns = os.realtime_ns();
  block->tp = layout.tp;
  block->pp = layout.pp;
  block->rank_count = rank_count;
  block->ring_capacity = options.ring_capacity;
  block->blocks_per_chunk = layout.blocks_per_chunk;
  block->chunk_count = layout.chunk_count;
  block->plan_offset = builder.offset_of(plan);
  block->plan_bytes = layout.plan_json.size();
  block->regions_offset = builder.offset_of(records);
  block->region_record_bytes = sizeof(RegionRecord);
  block->counters_offset = builder.offset_of(counters);
  block->doorbell_offset = builder.offset_of(doorbell);
  block->gate_offset = builder.offset_of(gate);
  block->generation.store(1, std::memory_order_relaxed);
  // Release: everything above is visible to a reader whose acquire load finds the magic
  // (find_control_block in control_segment.cc).
  block->magic.store(kControlMagic, std::memory_order_release);
}

// Sets the mode (and group) whatever the umask did to Boost's shm_open.
void set_permissions(Os& os, std::string_view arena, const SegmentOptions& options) {
  TrustedFile file = open_trusted(os, {std::string(kControlSegmentDir), control_segment_name(arena)}, O_RDWR,
                                  {FileType::kRegular, FileOwners::kTrusted, "control segment"});
  int rc = 0;
  if (options.group) rc = os.fchown(file.fd.get(), static_cast<uid_t>(-1), *options.group);
  const mode_t mode = options.group ? (options.mode | 0060) & 0660 : options.mode & 0666;
  if (rc == 0) rc = os.fchmod(file.fd.get(), mode);
  if (rc < 0) throw_errno(cat("cannot set the mode or group of control segment ", control_segment_path(arena)), -rc);
}

}  // namespace

uint64_t control_segment_bytes(const ArenaLayout& layout, const SegmentOptions& options) {
  const uint64_t ranks = layout.ranks.size();
  const uint64_t objects = padded(sizeof(ControlBlock)) + padded(sizeof(Doorbell)) + padded(sizeof(ReportGate)) +
                           padded(ranks * sizeof(RegionRecord)) + padded(sizeof(SchedulerCounters)) +
                           ranks * padded(ReportRing::memsize(options.ring_capacity)) + padded(layout.plan_json.size() + 1);
  const uint64_t allocations = 6 + ranks;  // every builder.allocate() in build_segment
  return *round_up(objects + allocations * kPerAllocationOverhead + kBoostOverheadBytes, 4 * kKiB);
}

void create_control_segment(Os& os, std::string_view arena, const ArenaLayout& layout,
                            const std::vector<RegionReport>& regions, const SegmentOptions& options) {
  check_arena_name(arena);
  check_layout(layout);
  if (ReportRing::memsize(options.ring_capacity) == 0) {
    throw Error(cat("ring capacity ", options.ring_capacity, " is not a power of two from ", ReportRing::kMinCapacity,
                    " to ", ReportRing::kMaxCapacity));
  }
  const std::string name = control_segment_name(arena);
  const std::string path = control_segment_path(arena);
  const uint64_t bytes = control_segment_bytes(layout, options);
  try {
    bip::managed_shared_memory segment(bip::create_only, name.c_str(), bytes, nullptr,
                                       bip::permissions(options.mode & 0600));
    try {
      set_permissions(os, arena, options);
      build(os, segment, bytes, arena, layout, regions, options);
    } catch (...) {
      bip::shared_memory_object::remove(name.c_str());
      throw;
    }
  } catch (const bip::interprocess_exception& error) {
    if (error.get_error_code() == bip::already_exists_error) {
      throw Error(cat("arena '", arena, "' already has a control segment (", path,
                      "): destroy it first with hugepin arena destroy ", arena), EEXIST);
    }
    bip::shared_memory_object::remove(name.c_str());
    throw Error(cat("cannot create control segment ", path, " of ", format_bytes(bytes), ": ", error.what()),
                error.get_native_error());
  }
}

}  // namespace hugepin
