#include "ipc/report_ring.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>

#include "base/contract.h"
#include "base/cpu_relax.h"
#include "base/error.h"
#include "ipc/ring_prefetch.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace hugepin {
namespace {

bool valid_capacity(uint32_t capacity) {
  return capacity >= ReportRing::kMinCapacity && capacity <= ReportRing::kMaxCapacity &&
         (capacity & (capacity - 1)) == 0;
}

// True when [offset, offset + length) lies inside [0, size), without overflow.
bool inside(uint64_t offset, uint64_t length, uint64_t size) { return offset <= size && length <= size - offset; }

constexpr size_t kLineBytes = 64;

// Fetches the line holding `address` into this CPU's caches, as a hint of kind `kKind`
// (ipc/ring_prefetch.h). Volatile asm, not __builtin_prefetch alone: GCC 12 found a function of
// nothing but prefetches "pure" and dropped every call to it.
template <RingPrefetch kKind>
void prefetch_line(const void* address) {
  static_assert(kKind != RingPrefetch::kOff);
#if defined(__x86_64__)
  if constexpr (kKind == RingPrefetch::kWrite) {
    asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(address)));
  } else {
    asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(address)));
  }
#elif defined(__aarch64__)
  if constexpr (kKind == RingPrefetch::kWrite) {
    asm volatile("prfm pstl1keep, %0" : : "Q"(*static_cast<const char*>(address)));
  } else {
    asm volatile("prfm pldl1keep, %0" : : "Q"(*static_cast<const char*>(address)));
  }
#else
  __builtin_prefetch(address, /*for a write=*/kKind == RingPrefetch::kWrite ? 1 : 0, /*keep in all levels=*/3);
#endif
}

// Prefetches every line of [begin, end), 64 bytes apart.
template <RingPrefetch kKind>
void prefetch_lines(const std::byte* begin, const std::byte* end) {
  for (const std::byte* line = begin; line < end; line += kLineBytes) prefetch_line<kKind>(line);
}

}  // namespace

static_assert(sizeof(ReportRing) % kCacheLinePair == 0, "the slots start on a line pair");
static_assert(alignof(ReportRing) == kCacheLinePair);

size_t ReportRing::memsize(uint32_t capacity) {
  if (!valid_capacity(capacity)) return 0;
  const size_t bytes = sizeof(ReportRing) + static_cast<size_t>(capacity) * sizeof(Report);
  return (bytes + kCacheLinePair - 1) / kCacheLinePair * kCacheLinePair;  // rings side by side stay aligned
}

ReportRing::ReportRing(uint32_t capacity, int64_t doorbell_offset, uint64_t first_index)
    : magic_(kMagic),
      capacity_(capacity),
      record_bytes_(sizeof(Report)),
      data_doorbell_offset_(doorbell_offset),
      first_index_(first_index),
      tail_(first_index),
      cached_head_(first_index),
      head_(first_index) {}

ReportRing* ReportRing::init(void* memory, uint32_t capacity, Doorbell* data_doorbell, uint64_t first_index) {
  HUGEPIN_REQUIRE(memsize(capacity) != 0, "capacity ", capacity, ": a power of two from ", kMinCapacity, " to ", kMaxCapacity);
  HUGEPIN_REQUIRE(reinterpret_cast<uintptr_t>(memory) % kCacheLinePair == 0, "memory at ", memory);
  int64_t doorbell_offset = 0;
  if (data_doorbell != nullptr) {
    doorbell_offset = reinterpret_cast<std::byte*>(data_doorbell) - static_cast<std::byte*>(memory);
  } else {
    doorbell_offset = static_cast<int64_t>(offsetof(ReportRing, own_data_doorbell_));
  }
  auto* ring = new (memory) ReportRing(capacity, doorbell_offset, first_index);
  // Sequence 0 is no index's stamp: every slot starts unpublished.
  std::memset(static_cast<void*>(ring->slots()), 0, static_cast<size_t>(capacity) * sizeof(Report));
  return ring;
}

const ReportRing* ReportRing::attach_read_only(const std::byte* mapping, size_t mapping_bytes, uint64_t offset) {
  const uint64_t size = mapping_bytes;
  if (offset % kCacheLinePair != 0 || !inside(offset, sizeof(ReportRing), size)) {
    throw Error(cat("ring at offset ", offset, " is misaligned or outside the ", size, "-byte segment"));
  }
  const auto* ring = reinterpret_cast<const ReportRing*>(mapping + offset);
  if (ring->magic_ != kMagic) throw Error(cat("ring at offset ", offset, " has a bad magic number"));
  if (ring->record_bytes_ != sizeof(Report)) {
    throw Error(cat("ring at offset ", offset, " holds ", ring->record_bytes_, "-byte records, this build ",
                    sizeof(Report)));
  }
  const uint32_t capacity = ring->capacity_;
  if (!valid_capacity(capacity)) throw Error(cat("ring at offset ", offset, " has capacity ", capacity));
  if (!inside(offset, memsize(capacity), size)) {
    throw Error(cat("ring at offset ", offset, " of capacity ", capacity, " runs past the ", size,
                    "-byte segment"));
  }
  // The doorbell, relative to the ring: checked against the segment before any arithmetic that
  // could overflow (offset <= size < 2^63 here).
  const int64_t relative = ring->data_doorbell_offset_;
  if (relative < -static_cast<int64_t>(offset) || relative > static_cast<int64_t>(size - offset)) {
    throw Error(cat("ring at offset ", offset, " has its doorbell outside the segment (", relative, " from the ring)"));
  }
  const uint64_t doorbell = offset + static_cast<uint64_t>(relative);  // modulo 2^64: in [0, size]
  if (doorbell % kCacheLinePair != 0 || !inside(doorbell, sizeof(Doorbell), size)) {
    throw Error(cat("ring at offset ", offset, " has its doorbell outside the segment (", relative, " from the ring)"));
  }
  // Indices that hold more than a full ring: a consumer would read slots as reports that were
  // never written. Tail is read before head: in a healthy ring, live or not, tail then never
  // exceeds the head read after it by more than the capacity (a consumer that moved on since
  // can make head pass that tail, which is no sign of damage).
  const uint64_t tail = ring->tail_.load(std::memory_order_acquire);
  const uint64_t head = ring->head_.load(std::memory_order_acquire);
  if ((tail >= head && tail - head > capacity) || head < ring->first_index_) {
    throw Error(cat("ring at offset ", offset, " has corrupt indices (head ", head, ", tail ", tail, ", first ",
                    ring->first_index_, ", capacity ", capacity, ")"));
  }
  return ring;
}

ReportRing* ReportRing::attach(std::byte* mapping, size_t mapping_bytes, uint64_t offset) {
  return const_cast<ReportRing*>(attach_read_only(mapping, mapping_bytes, offset));
}

void ReportRing::write_stamped(uint64_t index, const Report& record) {
#if defined(__SSE2__)
  // Two 16-byte stores: the record's first 8 bytes with the stamp, then its last 16. The copy
  // field by field it replaces made four, and a batch's stores queue in the store buffer while they
  // wait for lines the consumer last read. `hugepin bench ring` in batches of 32 (thirteenth
  // session, docs/performance.md): development VM (AMD EPYC, KVM) 72-78 M/s against 62-66 where its
  // vCPUs sit far apart, 134-148 against 133-138 where they sit close; GPU host (Sapphire Rapids)
  // 140-186 against 123-185, eight runs each: no slower.
  static_assert(offsetof(Report, sequence) == 8 && sizeof(Report) == 32);
  auto* to = reinterpret_cast<__m128i*>(&slot(index));
  const auto* from = reinterpret_cast<const __m128i*>(&record);
  const __m128i stamp = _mm_cvtsi64_si128(static_cast<long long>(stamp_for(index)));
  _mm_storeu_si128(to, _mm_unpacklo_epi64(_mm_loadl_epi64(from), stamp));
  _mm_storeu_si128(to + 1, _mm_loadu_si128(from + 1));
#else
  Report stamped = record;
  stamped.sequence = stamp_for(index);
  slot(index) = stamped;
#endif
}

void ReportRing::write_rest(uint64_t first, const Report* records, uint32_t n) {
  static_assert(kLineBytes % sizeof(Report) == 0);
  constexpr uint64_t kPerLine = kLineBytes / sizeof(Report);
  // Whole lines only, all of whose slots are free: never a line the consumer may still read.
  const uint64_t from = (first + n + kPrefetchAhead + kPerLine - 1) & ~(kPerLine - 1);
  const uint64_t to = std::min<uint64_t>(first + n + kPrefetchAhead + n, cached_head_ + capacity_) & ~(kPerLine - 1);
  if (from < to) {
    const RingPrefetch kind = ring_prefetch();
    if (kind != RingPrefetch::kOff) prefetch_slots(kind, from, to - from);
  }
  // A consumer that waits polls the first record's line. Its other records are written last, just
  // before the first one (write_published), so that the line changes hands once per batch, not
  // once per write. Slot lines start at indices that are multiples of kPerLine (the slots start on
  // a line and the capacity is a multiple of kPerLine).
  const uint32_t first_line = static_cast<uint32_t>(std::min<uint64_t>(kPerLine - first % kPerLine, n));
  for (uint32_t i = first_line; i < n; ++i) write_stamped(first + i, records[i]);
  for (uint32_t i = 1; i < first_line; ++i) write_stamped(first + i, records[i]);
}

void ReportRing::prefetch_slots(RingPrefetch kind, uint64_t first, uint64_t count) {
  const std::byte* begin = reinterpret_cast<const std::byte*>(&slot(first));
  const std::byte* array_end = reinterpret_cast<const std::byte*>(slots() + capacity_);
  const size_t bytes = count * sizeof(Report);
  const size_t until_end = std::min<size_t>(bytes, static_cast<size_t>(array_end - begin));
  const std::byte* start = reinterpret_cast<const std::byte*>(slots());
  auto lines = kind == RingPrefetch::kWrite ? prefetch_lines<RingPrefetch::kWrite> : prefetch_lines<RingPrefetch::kRead>;
  lines(begin, begin + until_end);
  lines(start, start + (bytes - until_end));  // past the array's end: from its start
}

void ReportRing::read_batch(uint64_t first, Report* out, uint32_t n) {
  const uint32_t at = static_cast<uint32_t>(first) & (capacity_ - 1);
  const uint32_t until_end = std::min(n, capacity_ - at);
  std::memcpy(out, slots() + at, until_end * sizeof(Report));
  if (until_end < n) std::memcpy(out + until_end, slots(), (n - until_end) * sizeof(Report));
}

bool ReportRing::has_space() const {
  // seq_cst: a Doorbell::wait condition (also acquire: pairs with the release store of head_ in
  // pop_batch).
  return tail_.load(std::memory_order_relaxed) - head_.load(std::memory_order_seq_cst) < capacity_;
}

bool ReportRing::has_data() const {
  const uint64_t head = head_.load(std::memory_order_relaxed);  // the consumer's own index
  // The stamp first: the slot's line is the one a spinning consumer reads anyway, and it also
  // finds a dead producer's uncounted batch, which no producer will wake the consumer for. Then
  // the index, seq_cst (also acquire), which pairs with the store of tail_ in publish_batch for
  // the doorbell; tail - head - 1 below the capacity: the index is past head (not behind it, as
  // after such a batch was taken).
  return published(head) || tail_.load(std::memory_order_seq_cst) - head - 1 < capacity_;
}

uint32_t ReportRing::push_wait(Os& os, const Report* records, uint32_t count, int64_t timeout_ns) {
  const int64_t deadline = deadline_after(os, timeout_ns);
  uint32_t written = 0;
  for (;;) {
    written += push_batch(os, records + written, count - written);
    if (written == count) return written;
    const int64_t remaining = time_left(os, deadline);
    if (remaining == 0 || !wait_for_space(os, remaining)) return written;
  }
}

bool ReportRing::wait_for_space(Os& os, int64_t timeout_ns) {
  // Rechecking: pop_batch rings the space doorbell without a fence.
  return space_doorbell_.wait_rechecking(os, [this] { return has_space(); }, timeout_ns);
}

void ReportRing::take_over_producer() {
  space_doorbell_.sleepers.store(0, std::memory_order_relaxed);
  // Before any scan: slots from here on up to head + capacity are free or unread, and stay so
  // however far the consumer moves on meanwhile.
  const uint64_t head = head_.load(std::memory_order_acquire);
  // Acquire: pairs with the release store below of a producer that took over before this one.
  uint64_t tail = tail_.load(std::memory_order_acquire);
  // A batch stamped but not counted: its stamps follow one another from the index (its first is
  // stamped last). Bounded by the capacity, so a corrupt segment cannot loop.
  for (uint32_t n = 0; n < capacity_ && published(tail); ++n) ++tail;
  // A batch cut short: some of its slots after the first may carry their stamps, and the consumer
  // would take them once the next batches reached them. Every slot from the index up to what a
  // dead producer could have written (its cached head + capacity, at most head + capacity) is
  // erased: all of them free, the consumer being at or below the index. Only those that carry their
  // own index's stamp are written (most slots are only read). Relaxed: the first publish after this
  // is a release store, which the consumer acquires before it reads any of these stamps.
  for (uint64_t index = tail; index - head < capacity_; ++index) {
    if (stamp_of(index).load(std::memory_order_relaxed) == stamp_for(index)) {
      stamp_of(index).store(0, std::memory_order_relaxed);
    }
  }
  tail_.store(tail, std::memory_order_release);
  cached_head_ = head;
}

bool ReportRing::wait_for_data(Os& os, int64_t timeout_ns, uint32_t spins) {
  for (uint32_t i = 0; i < spins; ++i) {
    if (has_data()) return true;
    cpu_relax();
  }
  return data_doorbell().wait(os, [this] { return has_data(); }, timeout_ns);
}

uint32_t ReportRing::pop_wait(Os& os, Report* out, uint32_t max, int64_t timeout_ns, uint32_t spins) {
  if (max == 0 || !wait_for_data(os, timeout_ns, spins)) return 0;
  return pop_batch(os, out, max);
}

uint64_t ReportRing::produced() const {
  return tail_.load(std::memory_order_acquire) - first_index_;  // pairs with the store in push_batch
}

uint64_t ReportRing::consumed() const {
  return head_.load(std::memory_order_acquire) - first_index_;  // pairs with the store in pop_batch
}

uint32_t ReportRing::depth() const {
  // Acquire pairs with the stores in pop_batch and publish_batch. Head first: the tail, read
  // later, is not below it, except when the consumer took a dead producer's uncounted batch.
  const uint64_t head = head_.load(std::memory_order_acquire);
  const uint64_t tail = tail_.load(std::memory_order_acquire);
  const uint64_t waiting = tail - head;
  return waiting <= capacity_ ? static_cast<uint32_t>(waiting) : 0;
}

bool wait_for_any(Os& os, Doorbell& doorbell, std::span<ReportRing* const> rings, int64_t timeout_ns,
                  uint32_t spins) {
  for (const ReportRing* ring : rings) {
    HUGEPIN_REQUIRE(&ring->data_doorbell() == &doorbell, "a ring sleeps on the doorbell at ", &ring->data_doorbell(),
                    ", not ", &doorbell);
  }
  auto any_data = [rings] {
    return std::any_of(rings.begin(), rings.end(), [](const ReportRing* ring) { return ring->has_data(); });
  };
  for (uint32_t i = 0; i < spins; ++i) {
    if (any_data()) return true;
    cpu_relax();
  }
  return doorbell.wait(os, any_data, timeout_ns);
}

}  // namespace hugepin
