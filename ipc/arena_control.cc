#include "ipc/arena_control.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>

#include "base/contract.h"
#include "base/error.h"
#include "base/log.h"
#include "base/process.h"
#include "base/trusted_file.h"
#include "hugemem/naming.h"
#include "ipc/arena_lock.h"
#include "ipc/owner_word.h"

namespace hugepin {
namespace {

// Removes the region files `report` lists (those this process just created) and then their
// directories when empty; nothing else of the name.
void remove_region_files(Os& os, const ArenaReport& report) {
  std::set<std::string> dirs;
  for (const RegionReport& region : report.regions) {
    os.unlink(region.path);
    const size_t slash = region.path.rfind('/');
    if (slash != std::string::npos && slash > 0) dirs.insert(region.path.substr(0, slash));
  }
  for (const std::string& dir : dirs) os.rmdir(dir);  // fails harmlessly when not empty
}


std::vector<RegionRequest> region_requests(const ArenaLayout& layout) {
  std::vector<RegionRequest> requests;
  for (const RankRegionLayout& rank : layout.ranks) {
    requests.push_back({flat_rank_of(layout, rank), rank.region_bytes, rank.numa_node});
  }
  std::sort(requests.begin(), requests.end(),
            [](const RegionRequest& a, const RegionRequest& b) { return a.rank < b.rank; });
  return requests;
}

// The control segment of `arena` as a listing shows it: looked at through O_PATH (never opened,
// never followed), anyone's. nullopt when there is none; a refused one is added to `refused`.
std::optional<SegmentFile> stat_segment(Os& os, std::string_view arena, std::vector<std::string>* refused) {
  const TrustedPath where{std::string(kControlSegmentDir), control_segment_name(arena)};
  try {
    const struct stat st = open_trusted(os, where, O_PATH, {FileType::kRegular, FileOwners::kAny, "control segment"}).status;
    return SegmentFile{where.full(), static_cast<uint64_t>(st.st_size), st.st_uid, st.st_gid, st.st_mode & 07777};
  } catch (const Error& error) {
    if (error.errno_value() == kRefusedErrno && refused != nullptr) refused->push_back(error.what());
    return std::nullopt;
  }
}

void warn_live_workers(Os& os, std::string_view name) {
  try {
    ControlSegment segment = ControlSegment::open(os, name, SegmentAccess::kReadOnly);
    for (uint32_t rank = 0; rank < segment.header().rank_count; ++rank) {
      RankStatus status = read_rank_status(os, segment.view().regions[rank]);
      if (status.alive) {
        log::warn(cat("arena '", name, "': rank ", rank, " is still attached by live pid ", status.pid,
                      " (its mapping stays valid until it exits)"));
      }
    }
  } catch (const Error&) {
    // A corrupt or unreadable segment is removed all the same.
  }
}

}  // namespace

ArenaCreated create_arena_with_control(Os& os, std::string_view name, const ArenaLayout& layout,
                                       const ArenaOptions& options, const ControlOptions& control,
                                       const RegionProgress& progress) {
  check_arena_name(name);
  check_layout(layout);
  SegmentOptions segment_options{control.ring_capacity, options.mode, options.group};
  if (ReportRing::memsize(control.ring_capacity) == 0) {
    throw Error(cat("ring capacity ", control.ring_capacity, " is not a power of two from ", ReportRing::kMinCapacity,
                    " to ", ReportRing::kMaxCapacity));
  }
  const std::string path = control_segment_path(name);
  std::vector<std::string> refused;
  if (stat_segment(os, name, &refused)) {
    throw Error(cat("arena '", name, "' already exists (control segment ", path,
                    "): destroy it first with hugepin arena destroy ", name), EEXIST);
  }
  if (!refused.empty()) throw Error(refused.front(), kRefusedErrno);  // a file planted in the segment's place
  ArenaCreated created;
  created.data = create_arena(os, name, region_requests(layout), options, progress);
  try {
    create_control_segment(os, name, layout, created.data.regions, segment_options);
    // Read it back as every other process will: a segment this build cannot parse is a failure now.
    ControlSegment segment = ControlSegment::open(os, name, SegmentAccess::kReadOnly);
    created.segment_path = segment.path();
    created.segment_bytes = segment.size();
    created.ring_capacity = segment.header().ring_capacity;
  } catch (...) {
    // Undo this call's work only. EEXIST: another create of the same name won the segment (its
    // data in another root, or another page size): its segment and files are not ours to touch.
    bool segment_ours = true;
    try {
      throw;
    } catch (const Error& error) {
      segment_ours = error.errno_value() != EEXIST;
    } catch (...) {
    }
    if (segment_ours) remove_control_segment(os, name);
    remove_region_files(os, created.data);
    throw;
  }
  return created;
}

std::vector<ArenaEntry> list_arenas_with_control(Os& os, const ArenaOptions& where, std::vector<std::string>* refused) {
  std::map<std::string, ArenaEntry> entries;
  std::vector<std::string> files;
  if (os.list_data_dir(std::string(kControlSegmentDir), &files) == 0) {
    for (const std::string& file : files) {
      std::string arena = arena_of_segment_file(file);
      if (arena.empty()) continue;
      if (auto segment = stat_segment(os, arena, refused)) {
        entries[arena].name = arena;
        entries[arena].control = segment;
      }
    }
  }
  for (ArenaListing& listing : list_arenas(os, where, refused)) {
    ArenaEntry& entry = entries[listing.name];
    entry.name = listing.name;
    entry.regions = std::move(listing.regions);
  }
  std::vector<ArenaEntry> result;
  for (auto& [name, entry] : entries) result.push_back(std::move(entry));
  return result;
}

ArenaDestroyed destroy_arena_with_control(Os& os, std::string_view name, const ArenaOptions& where) {
  check_arena_name(name);
  warn_live_workers(os, name);
  ArenaDestroyed destroyed;
  destroyed.control_removed = remove_control_segment(os, name);
  try {
    destroyed.region_files = destroy_arena(os, name, where);
  } catch (const Error& error) {
    // A segment without data directories (a crash between the two): removing it was all. Any
    // other failure (a directory holding foreign files, a permission) is reported, not hidden.
    if (!destroyed.control_removed || error.errno_value() != ENOENT) throw;
  }
  return destroyed;
}

// --- ArenaControl ---

ArenaControl ArenaControl::adopt(Os& os, std::string_view name) {
  ArenaControl control;
  control.os_ = &os;
  control.segment_ = ControlSegment::open(os, name, SegmentAccess::kReadWrite);
  SchedulerCounters& counters = control.segment_.scheduler_counters();
  const uint64_t mine = owner_word(self_identity(os));
  const ArenaClaimLock claim_lock = ArenaClaimLock::take(os, control.segment_, name);  // see ipc/arena_lock.h
  for (;;) {
    // Acquire pairs with the release compare-and-swaps below and in release().
    uint64_t holder = counters.owner.load(std::memory_order_acquire);
    if (holder == mine) throw Error(cat("this process already holds the scheduler role of arena '", name, "'"), EBUSY);
    if (owner_alive(os, holder)) {
      throw Error(cat("arena '", name, "' already has a scheduler: live pid ", owner_pid(holder)), EBUSY);
    }
    if (counters.owner.compare_exchange_weak(holder, mine, std::memory_order_acq_rel)) break;
  }
  control.owner_ = mine;
  // Sleepers counted by a scheduler that died asleep would cost every push a wake-up call.
  control.segment_.doorbell().sleepers.store(0, std::memory_order_relaxed);
  control.segment_.gate().forget_sleeper();
  control.segment_.gate().forget_tallies();
  control.generation_ = bump_generation(control.segment_);
  for (uint32_t rank = 0; rank < control.header().rank_count; ++rank) {
    control.rings_.push_back(&control.segment_.ring(rank));
  }
  return control;
}

ArenaControl::~ArenaControl() { release(); }

ArenaControl::ArenaControl(ArenaControl&& other) noexcept
    : os_(other.os_),
      segment_(std::move(other.segment_)),
      owner_(std::exchange(other.owner_, 0)),
      generation_(other.generation_),
      rings_(std::move(other.rings_)) {}

ArenaControl& ArenaControl::operator=(ArenaControl&& other) noexcept {
  if (this != &other) {
    release();
    os_ = other.os_;
    segment_ = std::move(other.segment_);
    owner_ = std::exchange(other.owner_, 0);
    generation_ = other.generation_;
    rings_ = std::move(other.rings_);
  }
  return *this;
}

void ArenaControl::release() {
  if (owner_ == 0) return;
  if (getpid() != owner_pid(owner_)) {  // a forked child: the role is its parent's
    owner_ = 0;
    return;
  }
  uint64_t expected = owner_;
  // Release pairs with the acquire load in adopt(): the next scheduler sees what this one did.
  segment_.scheduler_counters().owner.compare_exchange_strong(expected, kNoOwner, std::memory_order_release);
  owner_ = 0;
}

ArenaLayout ArenaControl::layout() const { return segment_layout(segment_.view()); }

// Each step checks the segment afterwards: what a truncated segment gave is zeros, never used.
size_t ArenaControl::consume(uint32_t rank, std::span<Report> out) {
  HUGEPIN_REQUIRE(rank < rings_.size(), "rank ", rank, " of ", rings_.size());
  const auto max = static_cast<uint32_t>(std::min<size_t>(out.size(), UINT32_MAX));
  const size_t popped = rings_[rank]->pop_batch(*os_, out.data(), max);
  segment_.check_intact();
  return popped;
}

bool ArenaControl::wait_for_reports(int64_t timeout_ns) {
  // The mark first: a report counted before it was published before it, so the look at the
  // rings below sees it; one counted after it meets the wait's target of one.
  const GateMark mark = report_mark();
  const bool any = std::any_of(rings_.begin(), rings_.end(), [](const ReportRing* ring) { return ring->has_data(); });
  return any || wait_for_reports(mark, 1, timeout_ns);
}

GateMark ArenaControl::report_mark() const { return segment_.view().gate->mark(); }

bool ArenaControl::wait_for_reports(const GateMark& since, uint64_t reports, int64_t timeout_ns, uint64_t releases,
                                    GateWaitEnd* end, int64_t slack_ns) {
  const bool met = segment_.gate().wait(*os_, since, reports, timeout_ns, releases, end, slack_ns);
  segment_.check_intact();
  return met;
}

void ArenaControl::open_job_tally(uint64_t job, uint32_t ranks) { segment_.gate().open_tally(job, ranks); }

void ArenaControl::end_job_tally(uint64_t job) { segment_.gate().end_tally(job); }

RankStatus ArenaControl::rank_status(uint32_t rank) {
  RankStatus status = read_rank_status(*os_, segment_.region(rank));
  segment_.check_intact();
  return status;
}

bool ArenaControl::mark_dead_if_gone(uint32_t rank) {
  const bool marked = mark_rank_dead_if_gone(*os_, segment_, rank);
  segment_.check_intact();
  return marked;
}

uint64_t bump_generation(ControlSegment& segment) {
  // acq_rel: after the previous adopter's bump; pairs with the acquire load in snapshot_segment.
  return segment.block().generation.fetch_add(1, std::memory_order_acq_rel) + 1;
}

bool mark_rank_dead_if_gone(Os& os, ControlSegment& segment, uint32_t rank) {
  HUGEPIN_REQUIRE(rank < segment.header().rank_count, "rank ", rank, " of ", segment.header().rank_count);
  RegionRecord& record = segment.region(rank);
  // Acquire pairs with the release compare-and-swaps of `status` (update_status) and of `owner`
  // (claim and release) in rank_attachment.cc.
  uint64_t status = record.status.load(std::memory_order_acquire);
  const uint64_t holder = record.owner.load(std::memory_order_acquire);
  if (holder == kNoOwner || status_state(status) == static_cast<uint8_t>(RankState::kDead)) return false;
  if (owner_alive(os, holder)) return false;
  // Fails when a new worker attached since `status` was read: its attach bumped the generation.
  return record.status.compare_exchange_strong(status, pack_status(status_generation(status), RankState::kDead),
                                               std::memory_order_acq_rel);
}

void ArenaControl::publish(const PublishedFigures& figures) {
  HUGEPIN_REQUIRE(owner_ != 0 && owner_pid(owner_) == getpid(), "held for pid ", owner_pid(owner_), " (0: not held)");
  write_scheduler_figures(segment_.scheduler_counters(), figures, os_->monotonic_ns());
  segment_.check_intact();
}

}  // namespace hugepin
