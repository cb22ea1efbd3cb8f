#include "ipc/rank_attachment.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "base/error.h"
#include "base/log.h"
#include "base/process.h"
#include "base/size.h"
#include "base/trusted_file.h"
#include "hugemem/arena.h"
#include "hugemem/naming.h"
#include "ipc/arena_lock.h"
#include "ipc/owner_word.h"

namespace hugepin {
namespace {

std::string rank_name(std::string_view arena, uint32_t rank, uint32_t tp_rank, uint32_t pp_rank) {
  return cat("rank ", rank, " (tp ", tp_rank, ", pp ", pp_rank, ") of arena '", arena, "'");
}

// Claims `record` for `mine`; returns the dead holder it replaced (kNoOwner when it was free).
uint64_t claim(Os& os, RegionRecord& record, uint64_t mine, const std::string& name) {
  for (;;) {
    // Acquire pairs with the release compare-and-swap of the previous holder (attach or detach).
    uint64_t holder = record.owner.load(std::memory_order_acquire);
    if (holder == mine) throw Error(cat(name, " is already attached by this process (pid ", owner_pid(mine), ")"), EBUSY);
    if (owner_alive(os, holder)) {
      throw Error(cat(name, " is attached by live pid ", owner_pid(holder), ": one worker per rank"), EBUSY);
    }
    if (record.owner.compare_exchange_weak(holder, mine, std::memory_order_acq_rel)) return holder;
  }
}

// Moves the state to `state`, bumping the attach generation when `new_generation`; returns the
// generation. A compare-and-swap loop: the scheduler may mark the rank dead meanwhile.
uint64_t update_status(RegionRecord& record, RankState state, bool new_generation) {
  // Acquire pairs with the release compare-and-swaps below and in ArenaControl::mark_dead_if_gone.
  uint64_t status = record.status.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t generation = status_generation(status) + (new_generation ? 1 : 0);
    // Release pairs with the acquire loads in read_rank_status and mark_dead_if_gone.
    if (record.status.compare_exchange_weak(status, pack_status(generation, state), std::memory_order_acq_rel)) {
      return generation;
    }
  }
}

// The region of `rank`, found by the arena's name under the data roots of `where`; `recorded`,
// the path the segment holds, only picks which of those roots, and must be one of them.
MappedRegion open_rank_region(Os& os, std::string_view arena, uint32_t rank, std::string_view recorded,
                              const ArenaOptions& where, const std::string& name) {
  std::string looked;
  for (const std::string& root : arena_data_roots(os, where)) {
    const TrustedPath location = region_location(root, arena, rank);
    if (location.full() == recorded) return MappedRegion::open(os, location, /*writable=*/true);
    looked += cat(looked.empty() ? "" : ", ", root);
  }
  throw Error(cat(name, ": the control segment records region file '", recorded, "', which is not the rank's file in any ",
                  "data directory of this arena (", looked, "): refusing it (attach with the directories the arena was ",
                  "created in)"),
              kRefusedErrno);
}

}  // namespace

RankAttachment RankAttachment::attach(Os& os, std::string_view arena, uint32_t tp_rank, uint32_t pp_rank,
                                      const AttachOptions& options) {
  RankAttachment attachment;
  attachment.os_ = &os;
  attachment.post_timeout_ns_ = options.post_timeout_ns;
  attachment.segment_ = ControlSegment::open(os, arena, SegmentAccess::kReadWrite);
  const SegmentHeader& header = attachment.segment_.header();
  if (tp_rank >= header.tp || pp_rank >= header.pp) {
    throw Error(cat("rank (tp ", tp_rank, ", pp ", pp_rank, ") is outside arena '", arena, "' (tp ", header.tp, " x pp ",
                    header.pp, ")"), ERANGE);
  }
  const uint32_t rank = flat_rank(tp_rank, pp_rank, header.tp);
  const std::string name = rank_name(arena, rank, tp_rank, pp_rank);
  RegionRecord& record = attachment.segment_.region(rank);
  const ProcessIdentity self = self_identity(os);
  const uint64_t mine = owner_word(self);
  // Held until the attach is done: a retention destroy cannot run between the claim and here.
  ArenaClaimLock claim_lock = ArenaClaimLock::take(os, attachment.segment_, arena);
  const uint64_t replaced = claim(os, record, mine, name);
  attachment.record_ = &record;
  attachment.rank_ = rank;
  attachment.owner_ = mine;
  attachment.pid_ = self.pid;
  attachment.ring_ = &attachment.segment_.ring(rank);
  attachment.gate_ = &attachment.segment_.gate();
  bool status_set = false;
  try {
    attachment.region_ = open_rank_region(os, arena, rank, attachment.segment_.view().backing_paths[rank], options.where, name);
    if (attachment.region_.size() != record.bytes) {
      throw Error(cat(name, ": region file ", attachment.region_.path(), " is ", attachment.region_.size(),
                      " bytes, the control segment says ", record.bytes));
    }
    if (replaced != kNoOwner) {
      attachment.took_over_ = true;
      record.takeovers.fetch_add(1, std::memory_order_relaxed);
    }
    // Whoever produced on the ring before, dead or detached: its last batch counted, a cut-short
    // one erased, its sleep on the space doorbell forgotten. Cheap enough to do always (at most a
    // store per slot, once per attach).
    attachment.ring_->take_over_producer();
    attachment.attach_generation_ = update_status(record, RankState::kAttached, /*new_generation=*/true);
    status_set = true;
    record.heartbeat_ns.store(os.monotonic_ns(), std::memory_order_relaxed);
    attachment.post(ReportKind::kAttach, static_cast<uint64_t>(self.pid));
  } catch (...) {
    if (status_set) update_status(record, RankState::kDetached, /*new_generation=*/false);
    attachment.release();
    throw;
  }
  return attachment;
}

RankAttachment::~RankAttachment() {
  if (!attached()) return;
  try {
    detach();
  } catch (const std::exception& error) {
    log::warn(cat("detaching rank ", rank_, ": ", error.what()));
  }
}

RankAttachment::RankAttachment(RankAttachment&& other) noexcept { take(other); }

RankAttachment& RankAttachment::operator=(RankAttachment&& other) noexcept {
  if (this != &other) {
    { RankAttachment old(std::move(*this)); }  // detaches what this held
    take(other);
  }
  return *this;
}

void RankAttachment::take(RankAttachment& other) noexcept {
  os_ = other.os_;
  segment_ = std::move(other.segment_);
  region_ = std::move(other.region_);
  record_ = std::exchange(other.record_, nullptr);
  ring_ = std::exchange(other.ring_, nullptr);
  gate_ = std::exchange(other.gate_, nullptr);
  rank_ = other.rank_;
  owner_ = std::exchange(other.owner_, 0);
  pid_ = other.pid_;
  took_over_ = other.took_over_;
  attach_generation_ = other.attach_generation_;
  post_timeout_ns_ = other.post_timeout_ns_;
}

void RankAttachment::release() {
  if (owner_ == 0) return;
  uint64_t expected = owner_;
  // Release pairs with the acquire load in claim(): the next worker sees everything this one did.
  record_->owner.compare_exchange_strong(expected, kNoOwner, std::memory_order_release);
  owner_ = 0;
}

void RankAttachment::detach() {
  if (!attached()) return;
  if (getpid() != pid_) {  // a forked child: the rank belongs to the parent
    owner_ = 0;
    return;
  }
  struct Release {
    RankAttachment* self;
    ~Release() { self->release(); }
  } release_anyway{this};
  try {
    post(ReportKind::kDetach, static_cast<uint64_t>(pid_));
  } catch (...) {
    store_state(RankState::kDetached);
    throw;
  }
  store_state(RankState::kDetached);
}

uint32_t RankAttachment::tp_rank() const { return record_->tp_rank; }
uint32_t RankAttachment::pp_rank() const { return record_->pp_rank; }
uint64_t RankAttachment::payload_bytes_per_block() const { return record_->payload_bytes_per_block; }

void RankAttachment::stamp(std::span<Report> reports) const {
  // The sequence is the ring's to write (ipc/report_ring.h).
  const auto now = static_cast<uint64_t>(os_->monotonic_ns());
  for (Report& report : reports) {
    report.rank = static_cast<uint16_t>(rank_);
    report.time_ns = now;
  }
}

void RankAttachment::post(ReportKind kind, uint64_t value, uint32_t flags) {
  Report report{kind, 0, flags, 0, value, 0};
  post_batch(std::span<Report>(&report, 1));
}

uint32_t RankAttachment::publish(const Report* reports, uint32_t count) {
  const uint32_t n = ring_->publish_batch(reports, count);
  if (n == 0) return 0;
  uint32_t urgent = 0;
  uint32_t releases = 0;
  uint32_t tallies_ended = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const ReportKind kind = reports[i].kind;
    // A copy report of the job's last rank ends its tally: the job can settle (ipc/report_gate.h).
    const bool copy = kind == ReportKind::kCopyComplete || kind == ReportKind::kCopyFailed;
    const bool ended = copy && gate_->tick_tally(reports[i].value);
    if (urgent_report(kind)) {
      ++urgent;
    } else if (kind == ReportKind::kComputeRelease) {
      ++releases;
    } else if (ended) {
      ++tallies_ended;
    }
  }
  gate_->count(*os_, n - urgent, urgent + tallies_ended, releases);
  return n;
}

void RankAttachment::post_batch(std::span<Report> reports) {
  if (!attached()) throw Error(cat("rank ", rank_, " is not attached: cannot post"));
  segment_.check_intact();
  stamp(reports);
  const int64_t deadline = deadline_after(*os_, post_timeout_ns_);
  size_t posted = 0;
  for (;;) {
    const auto count = static_cast<uint32_t>(std::min<size_t>(reports.size() - posted, UINT32_MAX));
    posted += publish(reports.data() + posted, count);
    segment_.check_intact();  // a truncated ring reads as capacity 0: no progress, ever
    if (posted == reports.size()) return;
    const int64_t remaining = time_left(*os_, deadline);
    if (remaining == 0 || !ring_->wait_for_space(*os_, remaining)) {
      throw Error(cat("the report ring of rank ", rank_, " stayed full for ", post_timeout_ns_ / 1'000'000,
                      " ms (the scheduler is not consuming): posted ", posted, " of ", reports.size(), " reports"),
                  EAGAIN);
    }
  }
}

size_t RankAttachment::try_post(std::span<Report> reports) {
  if (!attached()) throw Error(cat("rank ", rank_, " is not attached: cannot post"));
  segment_.check_intact();
  stamp(reports);
  size_t posted = 0;
  while (posted < reports.size()) {
    const auto count = static_cast<uint32_t>(std::min<size_t>(reports.size() - posted, UINT32_MAX));
    const uint32_t n = publish(reports.data() + posted, count);
    posted += n;
    if (n < count) break;
  }
  segment_.check_intact();
  return posted;
}

bool RankAttachment::heartbeat() {
  const int64_t now = os_->monotonic_ns();
  record_->heartbeat_ns.store(now, std::memory_order_relaxed);
  Report report{ReportKind::kHeartbeat, 0, 0, 0, static_cast<uint64_t>(now), 0};
  return try_post(std::span<Report>(&report, 1)) == 1;
}

void RankAttachment::store_state(RankState state) { update_status(*record_, state, /*new_generation=*/false); }

void RankAttachment::set_state(RankState state) {
  if (!attached()) throw Error(cat("rank ", rank_, " is not attached"));
  store_state(state);
}

void RankAttachment::set_pinned_bytes(uint64_t bytes) { record_->pinned_bytes.store(bytes, std::memory_order_relaxed); }

}  // namespace hugepin
