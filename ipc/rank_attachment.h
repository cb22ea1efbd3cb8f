// A worker's attachment to its rank of an arena: its own data region mapped, its record claimed,
// and the producer end of its report ring.
//
// attach() claims the rank by compare-and-swap of the record's owner word (pid and start time):
// a rank held by a live process is refused (Error EBUSY naming the rank and the pid); a rank whose
// holder died is taken over and counted. The attachment is then the one producer of the rank's
// ring; the scheduler is its one consumer. A worker maps only its own region.
//
// A control segment truncated under the worker by another process never kills it (the mapping
// is guarded, base/truncation_guard.h): post, post_batch, try_post and heartbeat then throw Error
// (EIO) naming the segment.
//
// Thread-safety: one thread at a time per attachment (the ring has one producer). Move-only: it
// owns the mappings and the rank.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/os.h"
#include "hugemem/backing.h"
#include "hugemem/region.h"
#include "ipc/control_segment.h"
#include "protocol/report.h"

namespace hugepin {

struct AttachOptions {
  // How long a post waits for room in a full ring before it fails with EAGAIN.
  int64_t post_timeout_ns = 1'000'000'000;
  // Where the arena's data may be (hugetlbfs_dir, shm_dir: what it was created with; every
  // hugetlbfs mount is looked at too). The rank's region file is found there by the arena's name
  // and rank, never at a path read from the segment, which anyone who may write it could change.
  ArenaOptions where;
};

class RankAttachment {
 public:
  // Opens arena `arena` (its control segment read-write: only its owner, root, or members of its
  // group when it is group-shared), claims rank (tp_rank, pp_rank), maps its region read-write and
  // posts a kAttach report (value: pid). The region is the arena's file for the rank under one of
  // options.where's data roots, opened as base/trusted_file.h says; the segment's recorded backing
  // path must name that same file. Throws Error: no such arena or rank, access refused, the rank
  // held by a live process (EBUSY), the region file missing, refused, not the one the segment
  // records (kRefusedErrno) or not the recorded size, the ring full past the post timeout
  // (EAGAIN). On failure the rank is left as it was found, except that a dead holder's claim stays
  // replaced.
  static RankAttachment attach(Os& os, std::string_view arena, uint32_t tp_rank, uint32_t pp_rank,
                               const AttachOptions& options = {});

  RankAttachment() = default;
  // Detaches when still attached; a failure is logged, not thrown.
  ~RankAttachment();
  RankAttachment(RankAttachment&& other) noexcept;
  RankAttachment& operator=(RankAttachment&& other) noexcept;
  RankAttachment(const RankAttachment&) = delete;
  RankAttachment& operator=(const RankAttachment&) = delete;

  // Posts kDetach (value: pid), marks the rank detached and gives it back. Throws Error (EAGAIN)
  // when the ring stays full past the post timeout; the rank is given back all the same. A forked
  // child that inherited the attachment does nothing here: the rank is its parent's.
  void detach();
  bool attached() const { return owner_ != 0; }

  uint32_t rank() const { return rank_; }  // flat: pp_rank * tp + tp_rank
  uint32_t tp_rank() const;
  uint32_t pp_rank() const;
  const MappedRegion& region() const { return region_; }
  const SegmentHeader& header() const { return segment_.header(); }
  const ControlSegment& segment() const { return segment_; }
  uint64_t payload_bytes_per_block() const;
  // True when this attach replaced a worker that had died holding the rank.
  bool took_over() const { return took_over_; }
  uint64_t attach_generation() const { return attach_generation_; }

  // Stamps `kind`, `value` and `flags` with the rank and the time (the ring numbers it), and
  // posts it, waiting while the ring is full. Throws Error (EAGAIN) when the wait passes the post
  // timeout: the report is not posted.
  void post(ReportKind kind, uint64_t value, uint32_t flags = 0);
  // Stamps and posts every report of `reports` in order, waiting while the ring is full (for at
  // most the post timeout in all, however many ring-fulls the batch holds). Throws
  // Error (EAGAIN) naming how many were posted when the wait passes the post timeout.
  void post_batch(std::span<Report> reports);
  // Stamps and posts as many of `reports` as fit now, in order; returns how many (0: full).
  size_t try_post(std::span<Report> reports);

  // Records the time in the rank's heartbeat and posts a kHeartbeat report (value: that time) if
  // the ring has room; returns whether it did.
  bool heartbeat();
  // kPinning, kReady: what the worker's pinning is at (dma/ calls these).
  void set_state(RankState state);
  void set_pinned_bytes(uint64_t bytes);

 private:
  void take(RankAttachment& other) noexcept;
  void stamp(std::span<Report> reports) const;
  // Publishes up to `count` stamped reports on the ring and counts them on the arena's report
  // gate (which wakes the scheduler when they may settle something); returns how many fit.
  uint32_t publish(const Report* reports, uint32_t count);
  void store_state(RankState state);
  void release();

  Os* os_ = nullptr;
  ControlSegment segment_;
  MappedRegion region_;
  RegionRecord* record_ = nullptr;
  ReportRing* ring_ = nullptr;
  ReportGate* gate_ = nullptr;
  uint32_t rank_ = 0;
  uint64_t owner_ = 0;
  pid_t pid_ = 0;
  bool took_over_ = false;
  uint64_t attach_generation_ = 0;
  int64_t post_timeout_ns_ = 0;
};

}  // namespace hugepin
