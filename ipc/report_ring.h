// ReportRing: a single-producer single-consumer ring of Reports (ipc/report.h), built in place in
// memory that two processes share (a worker rank produces, the scheduler consumes).
//
// Built like DPDK's rte_ring: memsize(capacity) says how many bytes a ring needs, init() builds it
// in place, attach() validates one that another process built. The producer's index and the
// consumer's index sit on their own pairs of cache lines; the producer keeps a cached copy of the
// consumer's index, so the fast path of a push touches the consumer's line only when the ring
// looks full. Indices are 64-bit counters that never wrap in practice (2^64 reports); the slot is
// `index & (capacity - 1)`, and unsigned differences stay right across 2^64 anyway (tested there).
//
// The ring numbers the records: a record's `sequence` field becomes its count on this ring, from
// 1, whatever the producer put there, and that stamp is what publishes it. The consumer finds new
// records by their stamps; pop_batch never reads the producer's index (only a consumer about to
// sleep does, in has_data), so a record crosses between the two CPUs in its own cache line alone
// (the index's line used to cross too, once per pop of an empty-looking ring: half the traffic of
// a push and pop one record at a time). A batch's first record is stamped last, with a release
// store, and the consumer takes only stamps that follow one another from its index: a batch
// becomes visible whole or not at all. The producer's index is still stored after each batch, for
// the observers, the doorbell's wait condition and the next producer.
//
// A report is never dropped or duplicated: a push that finds no room writes fewer records (0 when
// full) and the caller chooses to wait (push_wait) or to back off. A producer killed mid-batch
// leaves nothing half-written behind: the consumer sees whole records or none. A producer killed
// between stamping a batch and storing its index leaves a batch the consumer takes anyway; the next
// producer calls take_over_producer() first, which moves the index past it and erases the stamps
// of a batch that was never published.
//
// Sleeping: a consumer that finds the ring empty may sleep on the ring's data doorbell (its own,
// or one doorbell that every ring of an arena shares, so that one scheduler thread can sleep on
// all of them); a producer wakes it with a system call only when someone sleeps there, which it
// checks after a fence (ipc/doorbell.h). A producer that finds the ring full sleeps on the ring's
// space doorbell, which the consumer checks after every pop without a fence (a fence on every pop
// for a wait that happens only when the consumer fell a whole ring behind): a wake-up it misses
// that way finds the producer at its next re-check, 50 us after it fell asleep at first, at most
// 5 ms later on (Doorbell::wait_rechecking). An
// arena's workers publish without ringing (publish_batch) and count their reports on the arena's
// report gate instead, which wakes the scheduler only when a job could have settled
// (ipc/report_gate.h).
//
// push_batch and pop_batch are inline (below the class), and a single record moves without a call:
// a push of one record is a few dozen instructions, and a call with its register saves was a
// measurable part of it. A batch of more is one call that copies it.
//
// Thread-safety: one producer and one consumer at a time, in any processes or threads (has_data and
// the waits are the consumer's); the observers (produced, consumed, depth) from anywhere,
// read-only mappings included.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "base/os.h"
#include "ipc/doorbell.h"
#include "ipc/ring_prefetch.h"
#include "protocol/report.h"

namespace hugepin {

class ReportRing {
 public:
  static constexpr uint32_t kMinCapacity = 2;
  static constexpr uint32_t kMaxCapacity = 1u << 24;  // 512 MiB of records
  // "HHPRING3": ring 2 published by the producer's index alone; ring 1 waited on another doorbell
  // protocol.
  static constexpr uint64_t kMagic = 0x33474e4952504848;

  // Bytes a ring of `capacity` records needs (a multiple of 128), or 0 when capacity is not a power
  // of two in [kMinCapacity, kMaxCapacity].
  static size_t memsize(uint32_t capacity);

  // Builds an empty ring in `memory` and returns it. REQUIRES: memory is 128-byte aligned and holds
  // memsize(capacity) bytes, memsize(capacity) != 0. `data_doorbell`: the doorbell the consumer
  // sleeps on, in the same shared mapping; null: the ring's own. `first_index` starts both indices
  // there (0 in production; tests start near 2^64 to check the index arithmetic across the wrap).
  static ReportRing* init(void* memory, uint32_t capacity, Doorbell* data_doorbell = nullptr,
                          uint64_t first_index = 0);

  // The ring another process built at `offset` in a mapping of `mapping_bytes` bytes at `mapping`.
  // Checks everything it relies on (magic, record size, capacity, that the ring and its doorbell
  // lie inside the mapping, alignment) and throws Error naming what is wrong. Touches nothing.
  static ReportRing* attach(std::byte* mapping, size_t mapping_bytes, uint64_t offset);
  static const ReportRing* attach_read_only(const std::byte* mapping, size_t mapping_bytes, uint64_t offset);

  ReportRing(const ReportRing&) = delete;
  ReportRing& operator=(const ReportRing&) = delete;

  // --- producer (one at a time) ---

  // Copies up to `count` records, in order, as many as there is room for, and returns how many:
  // 0 when the ring is full. Each copy's `sequence` is the ring's count of it, from 1 (the caller's
  // value is not kept). Wakes a consumer sleeping on the data doorbell.
  inline uint32_t push_batch(Os& os, const Report* records, uint32_t count);
  // push_batch without the wake-up: for producers that tell their consumer another way (an
  // arena's workers count their reports on the report gate, ipc/report_gate.h).
  inline uint32_t publish_batch(const Report* records, uint32_t count);
  // Returns true once the ring has room, false when `timeout_ns` (negative: no limit) passes
  // first; sleeps on the space doorbell, re-checking now and then (see Sleeping above).
  bool wait_for_space(Os& os, int64_t timeout_ns);
  // Copies all `count` records, sleeping on the space doorbell while the ring is full, for at most
  // `timeout_ns` in all (negative: no limit). Returns how many it copied: `count`, or fewer when
  // the time ran out (the rest were not written; the caller decides, e.g. EAGAIN).
  uint32_t push_wait(Os& os, const Report* records, uint32_t count, int64_t timeout_ns);

  // Called by a producer before its first push when it may follow another (always, for an
  // arena's ranks): moves the producer's index past a batch that a producer killed between
  // stamping and storing the index had published, erases the stamps a producer killed mid-batch
  // left on slots it never published (or the consumer would take them once the next batch
  // reached them), and forgets that the last producer may have died asleep on the space doorbell
  // (only the producer sleeps there). REQUIRES: no other producer is alive. The consumer may run.
  void take_over_producer();

  // --- consumer (one at a time) ---

  // Moves up to `max` records, oldest first, into `out` and returns how many (0 when empty).
  // Wakes a producer sleeping on the space doorbell (no fence: it may miss one that just fell
  // asleep, which finds the room at its next re-check).
  inline uint32_t pop_batch(Os& os, Report* out, uint32_t max);
  // Returns true once the ring holds a record, false when `timeout_ns` (negative: no limit) passes
  // first. Spins `spins` polite iterations before it sleeps on the data doorbell. A batch that a
  // producer killed before counting it left on the ring rings no doorbell: it is found at the next
  // wake (another push, or the timeout; give one where producers may die).
  bool wait_for_data(Os& os, int64_t timeout_ns, uint32_t spins = kDefaultSpins);
  // wait_for_data, then pop_batch: 0 only when the time ran out.
  uint32_t pop_wait(Os& os, Report* out, uint32_t max, int64_t timeout_ns, uint32_t spins = kDefaultSpins);

  // --- observers (anyone) ---

  uint32_t capacity() const { return capacity_; }
  // Records ever pushed (the producer's index minus the first index); acquire. A batch a killed
  // producer stamped but did not count is counted once the next producer takes over.
  uint64_t produced() const;
  // Records ever popped.
  uint64_t consumed() const;
  // Records waiting now by the two indices, read one after the other: in [0, capacity], 0 when
  // the consumer is past the producer's index (it took a dead producer's uncounted batch).
  uint32_t depth() const;
  // The doorbell the consumer sleeps on.
  Doorbell& data_doorbell() {
    return *reinterpret_cast<Doorbell*>(reinterpret_cast<std::byte*>(this) + data_doorbell_offset_);
  }
  const Doorbell& data_doorbell() const {
    return *reinterpret_cast<const Doorbell*>(reinterpret_cast<const std::byte*>(this) + data_doorbell_offset_);
  }
  // The doorbell a producer sleeps on while the ring is full (its `sleepers`: whether one does).
  const Doorbell& space_doorbell() const { return space_doorbell_; }
  // Whether the ring holds a record now: the next record is stamped, or the producer's index is
  // past the consumer's. Reads the producer's index with seq_cst, so it may serve as a
  // Doorbell::wait condition. The consumer's (it reads the slot at the consumer's index).
  bool has_data() const;

  static constexpr uint32_t kDefaultSpins = 256;

  // How far past a batch the producer prefetches the slots of the next ones, in records; the kind
  // of prefetch (write, read or none) is chosen per CPU at run time (ipc/ring_prefetch.h, with the
  // measurements). Likely why a write prefetch helps where it does (the H200 host: 170-185 M/s
  // against 86-106 without, batches of 32): the ring (128 KiB at 4096 records) outgrows the
  // first-level cache, and a batch's stores wait for their lines, which it fetches owned. Not for
  // single records: there it cost more instructions than it saved.
  static constexpr uint32_t kPrefetchAhead = 64;

 private:
  ReportRing(uint32_t capacity, int64_t doorbell_offset, uint64_t first_index);
  Report* slots() { return reinterpret_cast<Report*>(reinterpret_cast<std::byte*>(this) + sizeof(ReportRing)); }
  bool has_space() const;  // seq_cst: a Doorbell::wait condition
  // Free slots for a producer at `tail` if the consumer's index were `head` (clamped: a corrupt
  // segment cannot make it wrap).
  uint32_t room(uint64_t tail, uint64_t head) const {
    return capacity_ - static_cast<uint32_t>(std::min<uint64_t>(tail - head, capacity_));
  }
  Report& slot(uint64_t index) { return slots()[static_cast<uint32_t>(index) & (capacity_ - 1)]; }
  // The sequence the record at `index` carries once published: its count on this ring, from 1.
  // Never 0 (until 2^64 - 1 records), so a zeroed slot is never published.
  uint64_t stamp_for(uint64_t index) const { return index - first_index_ + 1; }
  // The slot's sequence field as the atomic the two sides meet on.
  std::atomic_ref<uint64_t> stamp_of(uint64_t index) const {
    return std::atomic_ref<uint64_t>(const_cast<ReportRing*>(this)->slot(index).sequence);
  }
  // Whether the record at `index` is published (acquire: its fields are complete, and so are the
  // records of its batch after it).
  bool published(uint64_t index) const {
    return stamp_of(index).load(std::memory_order_acquire) == stamp_for(index);
  }
  // Copies `record` into the slot of `index`, then stamps it with a release store: the store that
  // publishes it, and the records before it in program order (the rest of its batch).
  void write_published(uint64_t index, const Report& record);
  // Copies `record` into the slot of `index` with its stamp, plain stores: for the records of a
  // batch after its first, whose stamps the consumer reads only after the first one's.
  void write_stamped(uint64_t index, const Report& record);
  // Writes records 1..n-1 (n > 1) of the batch whose first record goes to index `first` (not
  // written here: write_published, after), and prefetches the lines of the `n` slots from
  // kPrefetchAhead past the batch on, those known to be free (below cached_head_ + capacity: the
  // consumer is done with them). Out of line: one call per batch, and the inline fast path stays
  // small enough to be inlined.
  void write_rest(uint64_t first, const Report* records, uint32_t n);
  // Prefetches the lines of `count` slots from index `first` on (whole lines), across the end,
  // with a hint of `kind` (not kOff).
  void prefetch_slots(RingPrefetch kind, uint64_t first, uint64_t count);
  // Copies `n` > 1 records out of the slots from index `first` on, across the array's end.
  void read_batch(uint64_t first, Report* out, uint32_t n);

  // Constants, written once by init().
  uint64_t magic_;
  uint32_t capacity_;
  uint32_t record_bytes_;  // sizeof(Report) when built: a layout check for attach()
  int64_t data_doorbell_offset_;  // from `this` to the data doorbell
  uint64_t first_index_;

  // Producer's pair of lines: its index and its last view of the consumer's.
  alignas(kCacheLinePair) std::atomic<uint64_t> tail_;  // next index to write
  uint64_t cached_head_;  // producer-only; head only grows, so a stale copy is a safe lower bound

  // Consumer's pair of lines.
  alignas(kCacheLinePair) std::atomic<uint64_t> head_;  // next index to read

  Doorbell own_data_doorbell_;
  Doorbell space_doorbell_;
  // capacity_ Reports follow.
};

// Returns true once any of `rings` holds a record, false when `timeout_ns` (negative: no limit)
// passes first. REQUIRES: every ring's data doorbell is `doorbell` (an arena's shared one).
bool wait_for_any(Os& os, Doorbell& doorbell, std::span<ReportRing* const> rings, int64_t timeout_ns,
                  uint32_t spins = ReportRing::kDefaultSpins);

// --- the inline fast paths ---

inline uint32_t ReportRing::push_batch(Os& os, const Report* records, uint32_t count) {
  const uint32_t n = publish_batch(records, count);
  if (n > 0) data_doorbell().ring(os);
  return n;
}

inline uint32_t ReportRing::publish_batch(const Report* records, uint32_t count) {
  const uint64_t tail = tail_.load(std::memory_order_relaxed);  // only this producer writes tail_
  uint32_t space = room(tail, cached_head_);
  if (space < count) {
    // Acquire pairs with the release store of head_ in pop_batch: the consumer is done reading the
    // slots below head, so they may be overwritten.
    cached_head_ = head_.load(std::memory_order_acquire);
    space = room(tail, cached_head_);
  }
  const uint32_t n = std::min(count, space);
  if (n == 0) return 0;
  if (n > 1) write_rest(tail, records, n);
  write_published(tail, records[0]);  // last: publishes the batch
  // Release pairs with the acquire loads of tail_ (observers, the seq_cst one in has_data).
  tail_.store(tail + n, std::memory_order_release);
  return n;
}

inline void ReportRing::write_published(uint64_t index, const Report& record) {
  Report& to = slot(index);
  to.kind = record.kind;
  to.rank = record.rank;
  to.flags = record.flags;
  to.value = record.value;
  to.time_ns = record.time_ns;
  // Release pairs with the acquire load in published().
  stamp_of(index).store(stamp_for(index), std::memory_order_release);
}

inline uint32_t ReportRing::pop_batch(Os& os, Report* out, uint32_t max) {
  const uint64_t head = head_.load(std::memory_order_relaxed);  // only this consumer writes head_
  const uint32_t limit = std::min(max, capacity_);
  // The stamps that follow one another from head: whole batches (a batch's first stamp is its
  // last store). Only these slots' lines are read, never the producer's.
  uint32_t n = 0;
  while (n < limit && published(head + n)) ++n;
  if (n == 0) return 0;
  if (n == 1) {
    out[0] = slot(head);
  } else {
    read_batch(head, out, n);
  }
  // Release pairs with the acquire load of head_ in push_batch (and the seq_cst one in has_space):
  // these slots are read and may be reused.
  head_.store(head + n, std::memory_order_release);
  space_doorbell_.ring_unfenced(os);  // its producer re-checks on its own (wait_for_space)
  return n;
}

}  // namespace hugepin
