// The bytes of a control segment (/dev/shm/hugepin.<arena>): the versioned layout every process
// of an arena shares. Offsets only, never pointers (each process maps the segment elsewhere); all
// offsets are from the start of the segment file.
//
//   ControlBlock      the header: magic, layout version, creator, TP x PP, chunks, and the
//                     offsets of everything below; first allocation, within the first 64 KiB
//   Doorbell          the rings' data doorbell (rung by a plain ReportRing push; workers count
//                     their reports on the gate instead)
//   ReportGate        what the scheduler sleeps on: counts of reports posted, job tallies
//                     (ipc/report_gate.h)
//   RegionRecord[n]   one per rank, in flat-rank order (pp_rank * tp + tp_rank)
//   SchedulerCounters the scheduler's figures for the inspector
//   ReportRing x n    one SPSC ring per rank, worker -> scheduler
//   plan text         the plan as JSON (may be empty)
//
// Who writes what after creation (no lock anywhere: a crashed process cannot leave one held):
// the report gate's counts belong to the workers (each adds its own) and its targets and sleeper
// count to the scheduler; a job tally on the gate is opened (and ended) by the scheduler and
// ticked down by the workers; each RegionRecord's attachment fields belong to the worker that holds its `owner` word (claimed
// by compare-and-swap); `status` may also be compare-and-swapped to kDead by the scheduler or by
// hugepind's reaper, and the attach generation in it defeats ABA; the ControlBlock's `generation`
// is bumped by each scheduler that adopts the arena and by hugepind when it adopts it; the scheduler counters belong to the scheduler; everything
// else is written once, at creation, before `magic` is published.
//
// Change anything here: bump kControlLayoutVersion (readers refuse other versions by name).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ipc/doorbell.h"

namespace hugepin {

inline constexpr uint64_t kControlMagic = 0x4c52544350475548;  // "HUGPCTRL"
inline constexpr uint32_t kControlLayoutVersion = 7;  // 7: space doorbells rung unfenced, their producers re-check; 6: doorbells fenced on both sides, no mark; 5: rings publish by stamps; 4: job tallies on the gate; 3: the report gate; 2: doorbells carry the unfenced-waker mark
// Readers look for the ControlBlock at every 128-byte boundary of the segment's first 64 KiB.
inline constexpr uint64_t kControlScanBytes = 64 * 1024;
inline constexpr size_t kArenaNameBytes = 72;     // 64 characters and a NUL, padded
inline constexpr size_t kBackingPathBytes = 256;  // with its NUL

enum class RankState : uint8_t {
  kCreated = 0,   // no worker has attached since creation
  kAttached = 1,  // a worker holds the rank
  kPinning = 2,   // it is registering the region for its GPU
  kReady = 3,     // registered: copies may run
  kDetached = 4,  // its worker left cleanly
  kDead = 5,      // the scheduler found its worker dead
};

// "created", "attached", ...; "unknown" for a value outside the enum (a corrupt segment).
std::string_view rank_state_name(uint8_t state);

// RegionRecord::status packs the attach generation (bumped by each attach) over the state.
inline uint64_t pack_status(uint64_t attach_generation, RankState state) {
  return (attach_generation << 8) | static_cast<uint8_t>(state);
}
inline uint64_t status_generation(uint64_t status) { return status >> 8; }
inline uint8_t status_state(uint64_t status) { return static_cast<uint8_t>(status & 0xff); }

struct alignas(kCacheLinePair) ControlBlock {
  // Stored last at creation, with release: a reader that finds it (acquire) sees the whole segment.
  std::atomic<uint64_t> magic;
  uint32_t layout_version;
  uint32_t block_bytes;           // sizeof(ControlBlock)
  uint64_t self_offset;           // this block's offset in the file: a found magic must agree
  uint64_t segment_bytes;         // the file's size
  char arena[kArenaNameBytes];    // NUL-terminated
  int32_t creator_pid;
  uint32_t creator_uid;
  uint64_t creator_start_ticks;
  int64_t created_realtime_ns;    // CLOCK_REALTIME
  uint32_t tp;
  uint32_t pp;
  uint32_t rank_count;            // tp * pp
  uint32_t ring_capacity;         // records per ring
  uint64_t blocks_per_chunk;
  uint64_t chunk_count;
  uint64_t plan_offset;
  uint64_t plan_bytes;
  uint64_t regions_offset;
  uint32_t region_record_bytes;   // sizeof(RegionRecord)
  uint32_t reserved;
  uint64_t counters_offset;
  uint64_t doorbell_offset;
  uint64_t gate_offset;
  // Bumped by each scheduler that adopts the arena, and by hugepind's adoption (1 at creation).
  alignas(kCacheLinePair) std::atomic<uint64_t> generation;
};

struct alignas(kCacheLinePair) RegionRecord {
  // Written at creation.
  uint32_t rank;                  // flat rank: pp_rank * tp + tp_rank
  uint32_t tp_rank;
  uint32_t pp_rank;
  int32_t node_requested;         // -1: none
  int32_t node_obtained;          // where most of its pages are (-1: unknown)
  uint32_t reserved;
  uint64_t page_size;
  uint64_t bytes;                 // the region file's size
  uint64_t payload_bytes_per_block;
  uint64_t chunk_count;
  uint64_t ring_offset;
  uint64_t ring_bytes;
  char backing_path[kBackingPathBytes];  // NUL-terminated

  // The attached worker's (see the file comment).
  alignas(kCacheLinePair) std::atomic<uint64_t> owner;  // owner_word() of the worker; 0: none yet
  std::atomic<uint64_t> status;          // pack_status(attach generation, RankState)
  std::atomic<int64_t> heartbeat_ns;     // CLOCK_MONOTONIC of its last heartbeat; 0: none
  std::atomic<uint64_t> takeovers;       // attaches that replaced a dead worker
  std::atomic<uint64_t> pinned_bytes;    // registered for the GPU so far (dma/ updates it)
};

static_assert(sizeof(ControlBlock) % kCacheLinePair == 0);
static_assert(sizeof(RegionRecord) % kCacheLinePair == 0);
static_assert(std::atomic<uint64_t>::is_always_lock_free, "atomics in shared memory must not hide a lock");

}  // namespace hugepin
