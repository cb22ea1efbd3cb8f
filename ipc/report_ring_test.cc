// ReportRing in one process: sizes, batch edges, full and empty, index arithmetic across 2^64,
// validation of a ring another process built, and the doorbells (no timing assertions).
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "base/error.h"
#include "ipc/report_ring.h"
#include "ipc/ring_prefetch.h"
#include "tests/support/fault_os.h"

namespace hugepin {
namespace {

// 128-byte aligned memory for rings in tests.
struct Buffer {
  explicit Buffer(size_t bytes) : size(bytes), data(static_cast<std::byte*>(std::aligned_alloc(kCacheLinePair, bytes))) {
    std::memset(data, 0xAB, bytes);
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  size_t size;
  std::byte* data;
};

Report make_report(uint64_t sequence) {
  return Report{ReportKind::kCopyComplete, 7, static_cast<uint32_t>(sequence * 3), sequence, sequence * 1000 + 1,
                sequence ^ 0x5555};
}

std::vector<Report> make_reports(uint64_t first_sequence, size_t count) {
  std::vector<Report> reports;
  for (size_t i = 0; i < count; ++i) reports.push_back(make_report(first_sequence + i));
  return reports;
}

void check_reports(const Report* reports, size_t count, uint64_t first_sequence) {
  for (size_t i = 0; i < count; ++i) {
    Report expected = make_report(first_sequence + i);
    CHECK(std::memcmp(&reports[i], &expected, sizeof(Report)) == 0);
  }
}

constexpr int64_t kForever = -1;

}  // namespace

TEST_CASE("memsize accepts powers of two in range only") {
  CHECK(ReportRing::memsize(0) == 0);
  CHECK(ReportRing::memsize(1) == 0);
  CHECK(ReportRing::memsize(3) == 0);
  CHECK(ReportRing::memsize(100) == 0);
  CHECK(ReportRing::memsize(ReportRing::kMaxCapacity * 2) == 0);
  CHECK(ReportRing::memsize(2) > 2 * sizeof(Report));
  CHECK(ReportRing::memsize(1024) - ReportRing::memsize(512) == 512 * sizeof(Report));
  CHECK(ReportRing::memsize(64) % kCacheLinePair == 0);
  CHECK(ReportRing::memsize(2) % kCacheLinePair == 0);  // rings side by side stay aligned
}

TEST_CASE("batches stop at full and at empty, and keep their order") {
  Os& os = real_os();
  Buffer buffer(ReportRing::memsize(8));
  ReportRing* ring = ReportRing::init(buffer.data, 8);
  Report out[16];
  CHECK(ring->pop_batch(os, out, 16) == 0);
  CHECK(ring->depth() == 0);
  CHECK_FALSE(ring->has_data());

  std::vector<Report> reports = make_reports(1, 12);
  CHECK(ring->push_batch(os, reports.data(), 0) == 0);
  CHECK(ring->push_batch(os, reports.data(), 5) == 5);
  CHECK(ring->push_batch(os, reports.data() + 5, 7) == 3);  // only 3 more fit
  CHECK(ring->depth() == 8);
  CHECK(ring->push_batch(os, reports.data() + 8, 1) == 0);  // full: nothing written, nothing lost
  CHECK(ring->produced() == 8);

  CHECK(ring->pop_batch(os, out, 3) == 3);
  check_reports(out, 3, 1);
  CHECK(ring->pop_batch(os, out, 0) == 0);
  CHECK(ring->push_batch(os, reports.data() + 8, 4) == 3);  // wraps the slot array
  CHECK(ring->pop_batch(os, out, 16) == 8);
  check_reports(out, 8, 4);
  CHECK(ring->pop_batch(os, out, 16) == 0);
  CHECK(ring->produced() == 11);
  CHECK(ring->consumed() == 11);
}

TEST_CASE("the ring numbers the records it carries, whatever sequence the producer gave them") {
  Os& os = real_os();
  Buffer buffer(ReportRing::memsize(8));
  ReportRing* ring = ReportRing::init(buffer.data, 8);
  std::vector<Report> reports = make_reports(1, 6);
  for (Report& report : reports) report.sequence = 999;
  REQUIRE(ring->push_batch(os, reports.data(), 1) == 1);
  REQUIRE(ring->push_batch(os, reports.data() + 1, 5) == 5);
  Report out[8];
  REQUIRE(ring->pop_batch(os, out, 8) == 6);
  check_reports(out, 6, 1);  // make_report(n) has sequence n: the ring's count, from 1
}

TEST_CASE("indices cross 2^64 without a lost or repeated record") {
  Os& os = real_os();
  const uint32_t capacity = 16;
  Buffer buffer(ReportRing::memsize(capacity));
  const uint64_t first = std::numeric_limits<uint64_t>::max() - 20;
  ReportRing* ring = ReportRing::init(buffer.data, capacity, nullptr, first);
  uint64_t next_push = 1;
  uint64_t next_pop = 1;
  Report out[capacity];
  // Batches of every size from 1 to capacity, so that every slot boundary meets the 2^64 wrap.
  for (uint32_t batch = 1; batch <= capacity; ++batch) {
    std::vector<Report> reports = make_reports(next_push, batch);
    REQUIRE(ring->push_batch(os, reports.data(), batch) == batch);
    next_push += batch;
    CHECK(ring->depth() == batch);
    REQUIRE(ring->pop_batch(os, out, capacity) == batch);
    check_reports(out, batch, next_pop);
    next_pop += batch;
  }
  CHECK(ring->produced() == next_push - 1);  // counted from the first index, across the wrap
  CHECK(ring->consumed() == next_pop - 1);
  CHECK(ring->produced() > 20);  // the indices did pass 2^64

  // Full and empty are still exact after the wrap.
  std::vector<Report> reports = make_reports(next_push, capacity + 1);
  CHECK(ring->push_batch(os, reports.data(), capacity + 1) == capacity);
  CHECK(ring->depth() == capacity);
  CHECK(ring->pop_batch(os, out, capacity) == capacity);
  check_reports(out, capacity, next_push);
}

TEST_CASE("push_wait writes what fits and reports the rest when the time runs out") {
  Os& os = real_os();
  Buffer buffer(ReportRing::memsize(4));
  ReportRing* ring = ReportRing::init(buffer.data, 4);
  std::vector<Report> reports = make_reports(1, 6);
  CHECK(ring->push_wait(os, reports.data(), 6, 1'000'000) == 4);  // 1 ms: nobody consumes
  CHECK(ring->push_wait(os, reports.data() + 4, 2, 0) == 0);
  Report out[4];
  CHECK(ring->pop_batch(os, out, 4) == 4);
  check_reports(out, 4, 1);
}

TEST_CASE("a full producer sleeps until the consumer makes room") {
  Os& os = real_os();
  const uint32_t capacity = 4;
  Buffer buffer(ReportRing::memsize(capacity));
  ReportRing* ring = ReportRing::init(buffer.data, capacity);
  const size_t total = 2000;
  std::vector<Report> reports = make_reports(1, total);
  std::thread producer([&] { CHECK(ring->push_wait(os, reports.data(), total, kForever) == total); });
  std::vector<Report> received;
  Report out[capacity];
  while (received.size() < total) {
    uint32_t n = ring->pop_wait(os, out, capacity, kForever, /*spins=*/0);
    received.insert(received.end(), out, out + n);
  }
  producer.join();
  check_reports(received.data(), total, 1);
}

TEST_CASE("a sleeping consumer is woken by a push") {
  Os& os = real_os();
  Buffer buffer(ReportRing::memsize(8));
  ReportRing* ring = ReportRing::init(buffer.data, 8);
  CHECK_FALSE(ring->wait_for_data(os, 1'000'000, 0));  // empty: times out

  std::atomic<int64_t> woke_ns{0};
  std::thread consumer([&] {
    CHECK(ring->wait_for_data(os, kForever, /*spins=*/0));
    woke_ns = real_os().monotonic_ns();
  });
  // Give the consumer time to fall asleep (not needed for correctness: it re-checks).
  while (ring->data_doorbell().sleepers.load() == 0) std::this_thread::yield();
  Report report = make_report(1);
  int64_t pushed_ns = real_os().monotonic_ns();
  CHECK(ring->push_batch(os, &report, 1) == 1);
  consumer.join();
  MESSAGE("futex wake-up latency (one sample, not a measurement): ", (woke_ns - pushed_ns) / 1000.0, " us");
  CHECK(ring->data_doorbell().sleepers.load() == 0);
}

TEST_CASE("one doorbell wakes a consumer of several rings") {
  Os& os = real_os();
  const size_t ring_bytes = ReportRing::memsize(8);
  Buffer buffer(sizeof(Doorbell) + 3 * ring_bytes);
  auto* doorbell = new (buffer.data) Doorbell;
  std::vector<ReportRing*> rings;
  for (size_t i = 0; i < 3; ++i) {
    rings.push_back(ReportRing::init(buffer.data + sizeof(Doorbell) + i * ring_bytes, 8, doorbell));
    CHECK(&rings.back()->data_doorbell() == doorbell);
  }
  CHECK_FALSE(wait_for_any(os, *doorbell, rings, 1'000'000, 0));
  std::thread producer([&] {
    while (doorbell->sleepers.load() == 0) std::this_thread::yield();
    Report report = make_report(1);
    CHECK(rings[2]->push_batch(os, &report, 1) == 1);
  });
  CHECK(wait_for_any(os, *doorbell, rings, kForever, 0));
  producer.join();
  CHECK(rings[2]->depth() == 1);
  CHECK(rings[0]->depth() == 0);
}

// Counts futex sleeps; forwards everything to the real system.
class SleepCountingOs : public test::ForwardingOs {
 public:
  SleepCountingOs() : ForwardingOs(real_os()) {}
  int futex_wait(const std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns, int64_t slack_ns) override {
    sleeps.fetch_add(1);
    return ForwardingOs::futex_wait(word, expected, timeout_ns, slack_ns);
  }
  std::atomic<int> sleeps{0};
};

// Counts membarrier(2) calls and refuses them, as a seccomp filter would; counts sleeps.
class MembarrierCountingOs : public SleepCountingOs {
 public:
  int membarrier(int) override {
    calls.fetch_add(1);
    return -ENOSYS;
  }
  std::atomic<int> calls{0};
};

TEST_CASE("the doorbells need no membarrier(2): a producer and a consumer that both sleep get every record") {
  // The waiter's barrier it once relied on does not reach every CPU (ipc/doorbell.h); each side's
  // own fence does the work now, so a kernel that refuses membarrier changes nothing.
  MembarrierCountingOs os;
  const uint32_t capacity = 8;
  Buffer buffer(ReportRing::memsize(capacity));
  ReportRing* ring = ReportRing::init(buffer.data, capacity);
  const size_t total = 2000;
  std::vector<Report> reports = make_reports(1, total);
  std::thread producer([&] { CHECK(ring->push_wait(os, reports.data(), total, kForever) == total); });
  std::vector<Report> received;
  Report out[capacity];
  while (received.size() < total) {
    const uint32_t n = ring->pop_wait(os, out, 1 + received.size() % capacity, kForever, /*spins=*/0);
    received.insert(received.end(), out, out + n);
  }
  producer.join();
  check_reports(received.data(), total, 1);
  CHECK(os.calls.load() == 0);
  CHECK(os.sleeps.load() > 0);  // someone slept: the doorbells were used, not only spun past
}

// Drops every futex wake-up (as a waker that read `sleepers` too early would); counts sleeps.
class DroppedWakeOs : public SleepCountingOs {
 public:
  int futex_wake(const std::atomic<uint32_t>*, int) override {
    dropped.fetch_add(1);
    return 0;
  }
  std::atomic<int> dropped{0};
};

TEST_CASE("a producer waiting for space finds it at its next re-check when the consumer's wake-up is lost") {
  // pop_batch rings the space doorbell without a fence, so it may miss a producer that just fell
  // asleep (ipc/doorbell.h: ring_unfenced); here every wake-up is lost, and the producer still
  // gets all its records in, long before its 20 s run out (a producer that slept until woken
  // would stop short, after a ring's worth or two).
  DroppedWakeOs os;
  const uint32_t capacity = 4;
  Buffer buffer(ReportRing::memsize(capacity));
  ReportRing* ring = ReportRing::init(buffer.data, capacity);
  const size_t total = 8 * capacity;
  std::vector<Report> reports = make_reports(1, total);
  std::atomic<uint32_t> pushed{0};
  std::atomic<bool> done{false};
  std::thread producer([&] {
    pushed = ring->push_wait(os, reports.data(), total, 20'000'000'000);
    done = true;
  });
  std::vector<Report> received;
  Report out[capacity];
  int sleeps_seen = 0;
  while (received.size() < total && !(done.load() && ring->depth() == 0)) {
    // Pop a full ring once its producer has gone to sleep on it again: the wake-up pop_batch
    // sends is dropped, and the producer's short spin before sleeping is over.
    if (!done.load() && (ring->depth() < capacity || ring->space_doorbell().sleepers.load() == 0 ||
                         os.sleeps.load() == sleeps_seen)) {
      std::this_thread::yield();
      continue;
    }
    sleeps_seen = os.sleeps.load();
    const uint32_t n = ring->pop_batch(os, out, capacity);
    received.insert(received.end(), out, out + n);
  }
  producer.join();
  CHECK(pushed.load() == total);
  REQUIRE(received.size() == total);
  check_reports(received.data(), total, 1);
  CHECK(os.dropped.load() >= 1);  // the consumer saw the producer asleep, and its wake-up was lost
}

TEST_CASE("the producer's prefetch is chosen by the CPU's vendor unless set") {
  for (RingPrefetch kind : {RingPrefetch::kOff, RingPrefetch::kRead, RingPrefetch::kWrite}) {
    CHECK(parse_ring_prefetch(ring_prefetch_name(kind)) == kind);
  }
  CHECK_FALSE(parse_ring_prefetch("auto").has_value());  // the command line's word for the default, not a kind
  CHECK_FALSE(parse_ring_prefetch("Write").has_value());
  CHECK(default_ring_prefetch("AuthenticAMD") == RingPrefetch::kRead);
  CHECK(default_ring_prefetch("GenuineIntel") == RingPrefetch::kWrite);
  CHECK(default_ring_prefetch("") == RingPrefetch::kWrite);  // not x86: as before, the write hint
#if defined(__x86_64__)
  CHECK(cpu_vendor().size() == 12);
#endif
  // Unset, the process uses its CPU's default; set, every ring's producer follows.
  CHECK(ring_prefetch() == default_ring_prefetch(cpu_vendor()));
  Os& os = real_os();
  const uint32_t capacity = 256;  // room for batches of 32 to prefetch 64 records past them
  Buffer buffer(ReportRing::memsize(capacity));
  for (RingPrefetch kind : {RingPrefetch::kWrite, RingPrefetch::kRead, RingPrefetch::kOff}) {
    set_ring_prefetch(kind);
    CHECK(ring_prefetch() == kind);
    ReportRing* ring = ReportRing::init(buffer.data, capacity);
    uint64_t next = 1;
    Report out[32];
    for (int round = 0; round < 40; ++round) {  // laps around the array, batches of 31 and 32
      const uint32_t batch = 31 + static_cast<uint32_t>(round % 2);
      std::vector<Report> reports = make_reports(next, batch);
      REQUIRE(ring->push_batch(os, reports.data(), batch) == batch);
      REQUIRE(ring->pop_batch(os, out, 32) == batch);
      check_reports(out, batch, next);
      next += batch;
    }
  }
  set_ring_prefetch(default_ring_prefetch(cpu_vendor()));
}

TEST_CASE("attach checks the ring another process built") {
  const uint32_t capacity = 8;
  const size_t ring_bytes = ReportRing::memsize(capacity);
  Buffer buffer(kCacheLinePair + ring_bytes);
  ReportRing* built = ReportRing::init(buffer.data + kCacheLinePair, capacity);
  CHECK(ReportRing::attach(buffer.data, buffer.size, kCacheLinePair) == built);

  CHECK_THROWS_AS(ReportRing::attach(buffer.data, buffer.size, 64), Error);  // misaligned
  CHECK_THROWS_AS(ReportRing::attach(buffer.data, buffer.size - 1, kCacheLinePair), Error);  // truncated
  CHECK_THROWS_AS(ReportRing::attach(buffer.data, buffer.size, buffer.size + kCacheLinePair), Error);
  CHECK_THROWS_AS(ReportRing::attach(buffer.data, buffer.size, std::numeric_limits<uint64_t>::max() - 127), Error);

  auto corrupt = [&](size_t field_offset, uint64_t value) {
    std::vector<std::byte> saved(buffer.data, buffer.data + buffer.size);
    std::memcpy(buffer.data + kCacheLinePair + field_offset, &value, sizeof value);
    std::string message;
    try {
      ReportRing::attach(buffer.data, buffer.size, kCacheLinePair);
    } catch (const Error& error) {
      message = error.what();
    }
    std::memcpy(buffer.data, saved.data(), saved.size());
    return message;
  };
  CHECK(corrupt(0, 42).find("bad magic") != std::string::npos);
  CHECK(corrupt(8, 7 | (uint64_t{sizeof(Report)} << 32)).find("capacity 7") != std::string::npos);
  CHECK(corrupt(8, 1024 | (uint64_t{sizeof(Report)} << 32)).find("runs past") != std::string::npos);
  CHECK(corrupt(8, capacity | (uint64_t{48} << 32)).find("48-byte records") != std::string::npos);
  CHECK(corrupt(16, uint64_t{1} << 40).find("doorbell outside") != std::string::npos);
  CHECK(corrupt(16, static_cast<uint64_t>(-int64_t{kCacheLinePair} * 2)).find("doorbell outside") !=
        std::string::npos);
  // tail_ starts the second line pair of the ring, head_ the third: a tail more than a full ring
  // ahead of head, or a head below the first index, is damage.
  CHECK(corrupt(kCacheLinePair, uint64_t{capacity} + 1).find("corrupt indices") != std::string::npos);
  CHECK(corrupt(kCacheLinePair, uint64_t{capacity}).empty());  // full is fine
  CHECK(ReportRing::attach(buffer.data, buffer.size, kCacheLinePair) == built);  // restored
}

}  // namespace hugepin
