// A producer killed with SIGKILL at random points, mid-batch included: the consumer sees whole
// records only, none twice, none missing, and the next producer (after take_over_producer)
// continues the sequence. Also what a killed producer can leave in the slots, set up by hand.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "base/cpu_relax.h"
#include "ipc/report_ring.h"

namespace hugepin {
namespace {

constexpr uint64_t kSeed = 20261129;

uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ull;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dull;
  return x ^ (x >> 33);
}

// Every field but the rank follows from the sequence, so a torn record cannot pass. The rank holds
// the producer's round: a record that a killed producer left behind and a later one's reader took
// would show as a round going back.
Report stamped(uint64_t sequence, uint16_t round = 3) {
  uint64_t value = mix(kSeed ^ sequence);
  return Report{ReportKind::kComputeRelease, round, static_cast<uint32_t>(value), sequence, value, ~value};
}

bool is_stamped(const Report& report, uint64_t sequence) {
  Report expected = stamped(sequence, report.rank);
  return std::memcmp(&report, &expected, sizeof(Report)) == 0;
}

// The producer: takes the ring over, continues from what it has published, in batches of 1..300,
// until killed.
[[noreturn]] void produce_forever(ReportRing* ring, uint64_t round) {
  std::mt19937_64 random(kSeed + round);
  std::vector<Report> batch;
  ring->take_over_producer();
  uint64_t next = ring->produced() + 1;
  for (;;) {
    batch.clear();
    const size_t size = 1 + random() % 300;
    for (size_t i = 0; i < size; ++i) batch.push_back(stamped(next + i, static_cast<uint16_t>(round)));
    next += ring->push_wait(real_os(), batch.data(), static_cast<uint32_t>(size), -1);
  }
}

struct Consumer {
  ReportRing* ring;
  uint64_t expected = 1;
  uint16_t round = 0;  // the latest producer round seen: never goes back
  uint64_t bad = 0;
  std::vector<Report> out = std::vector<Report>(512);

  // Pops what is there now; returns how many.
  uint32_t drain_once() {
    uint32_t n = ring->pop_batch(real_os(), out.data(), static_cast<uint32_t>(out.size()));
    for (uint32_t i = 0; i < n; ++i, ++expected) {
      if (!is_stamped(out[i], expected) || out[i].rank < round) ++bad;
      round = std::max(round, out[i].rank);
    }
    return n;
  }
};

}  // namespace

TEST_CASE("SIGKILL at random points leaves only whole records, and the next producer continues") {
  const uint32_t capacity = 1024;
  const size_t bytes = ReportRing::memsize(capacity);
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(memory != MAP_FAILED);
  ReportRing* ring = ReportRing::init(memory, capacity);
  Consumer consumer{ring};
  std::mt19937_64 random(kSeed);
  const int rounds = 40;
  for (int round = 0; round < rounds; ++round) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) produce_forever(ring, static_cast<uint64_t>(round));
    // Consume until this producer has published a random number of records (so it is running),
    // then kill it at a random moment: while it copies a batch (the consumer keeps draining) or
    // while it sleeps on a full ring (the consumer stops).
    const uint64_t target = ring->produced() + 1 + random() % 20000;
    while (ring->produced() < target) {
      if (consumer.drain_once() == 0) cpu_relax();
    }
    const bool keep_draining = random() % 4 != 0;
    const uint64_t spins = random() % 20000;
    for (uint64_t i = 0; i < spins; ++i) {
      if (!keep_draining || consumer.drain_once() == 0) cpu_relax();
    }
    REQUIRE(kill(pid, SIGKILL) == 0);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status));
    while (consumer.drain_once() != 0) {
    }
    CHECK(ring->depth() == 0);
    CHECK_FALSE(ring->has_data());
  }
  ring->take_over_producer();  // as the next producer would: counts a batch the last one published
  CHECK(consumer.bad == 0);
  CHECK(consumer.expected - 1 == ring->produced());
  CHECK(ring->produced() > 0);
  MESSAGE(rounds, " producers killed; ", ring->produced(), " records, all whole and in order");
  munmap(memory, bytes);
}

TEST_CASE("slots written but not published stay invisible and are overwritten") {
  const uint32_t capacity = 8;
  const size_t bytes = ReportRing::memsize(capacity);
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(memory != MAP_FAILED);
  ReportRing* ring = ReportRing::init(memory, capacity);
  Os& os = real_os();
  std::vector<Report> first = {stamped(1), stamped(2), stamped(3)};
  REQUIRE(ring->push_batch(os, first.data(), 3) == 3);
  // What a producer killed between copying a batch and publishing it leaves: slots 3..7 written
  // (here: with garbage), the index not moved.
  auto* slots = reinterpret_cast<std::byte*>(memory) + sizeof(ReportRing);  // the slots follow the ring
  std::memset(slots + 3 * sizeof(Report), 0xEE, 5 * sizeof(Report));
  CHECK(ring->depth() == 3);
  Report out[8];
  REQUIRE(ring->pop_batch(os, out, 8) == 3);
  for (uint64_t i = 0; i < 3; ++i) CHECK(is_stamped(out[i], i + 1));
  CHECK(ring->pop_batch(os, out, 8) == 0);
  // The next producer writes over them from the published index.
  ring->take_over_producer();
  CHECK(ring->produced() == 3);
  std::vector<Report> next = {stamped(4), stamped(5)};
  REQUIRE(ring->push_batch(os, next.data(), 2) == 2);
  REQUIRE(ring->pop_batch(os, out, 8) == 2);
  CHECK(is_stamped(out[0], 4));
  CHECK(is_stamped(out[1], 5));
  munmap(memory, bytes);
}

namespace {

// A ring of 8 in an anonymous shared mapping, with its slots open to the test (they follow the
// ring's header), to set up what a killed producer leaves.
struct SmallRing {
  static constexpr uint32_t kCapacity = 8;
  size_t bytes = ReportRing::memsize(kCapacity);
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ReportRing* ring = ReportRing::init(memory, kCapacity);
  Report* slots = reinterpret_cast<Report*>(static_cast<std::byte*>(memory) + sizeof(ReportRing));
  Os& os = real_os();

  ~SmallRing() { munmap(memory, bytes); }
  void push(uint64_t first_sequence, uint32_t count) {
    std::vector<Report> batch;
    for (uint32_t i = 0; i < count; ++i) batch.push_back(stamped(first_sequence + i));
    REQUIRE(ring->push_batch(os, batch.data(), count) == count);
  }
  // What a producer leaves in slot `index` (from 0) once it has written and stamped it.
  void write_stamped(uint64_t index) { slots[index % kCapacity] = stamped(index + 1); }
  std::vector<Report> pop_all() {
    Report out[kCapacity];
    const uint32_t n = ring->pop_batch(os, out, kCapacity);
    return std::vector<Report>(out, out + n);
  }
};

}  // namespace

TEST_CASE("a batch a killed producer stamped but did not count is taken, and counted by the next producer") {
  SmallRing small;
  REQUIRE(small.memory != MAP_FAILED);
  small.push(1, 3);
  // Killed after stamping its batch of 2 (its first slot last), before moving its index.
  small.write_stamped(4);
  small.write_stamped(3);
  CHECK(small.ring->produced() == 3);
  CHECK(small.ring->has_data());
  std::vector<Report> got = small.pop_all();
  REQUIRE(got.size() == 5);
  for (uint64_t i = 0; i < 5; ++i) CHECK(is_stamped(got[i], i + 1));
  // The consumer is past the index now: nothing waits, and nothing looks like it does.
  CHECK(small.ring->depth() == 0);
  CHECK_FALSE(small.ring->has_data());
  CHECK(small.pop_all().empty());
  small.ring->take_over_producer();
  CHECK(small.ring->produced() == 5);
  small.push(6, 2);
  got = small.pop_all();
  REQUIRE(got.size() == 2);
  CHECK(is_stamped(got[0], 6));
  CHECK(is_stamped(got[1], 7));
}

TEST_CASE("a consumer finds a killed producer's uncounted batch by its stamps, asleep or not") {
  SmallRing small;
  REQUIRE(small.memory != MAP_FAILED);
  small.push(1, 3);
  CHECK(small.pop_all().size() == 3);
  // Killed after stamping its batch of 2 at slots 3 and 4, the index left at 3 = head: only the
  // stamps say there is something to take, and no producer will ring the doorbell for it.
  small.write_stamped(4);
  small.write_stamped(3);
  CHECK(small.ring->has_data());
  Report out[1];
  REQUIRE(small.ring->pop_batch(small.os, out, 1) == 1);
  CHECK(is_stamped(out[0], 4));
  CHECK(small.ring->has_data());
  REQUIRE(small.ring->pop_wait(small.os, out, 1, 1'000'000, /*spins=*/0) == 1);  // at most 1 ms
  CHECK(is_stamped(out[0], 5));
  CHECK_FALSE(small.ring->has_data());
}

TEST_CASE("a batch cut short leaves stamps the next producer erases, so they are never taken") {
  SmallRing small;
  REQUIRE(small.memory != MAP_FAILED);
  small.push(1, 3);
  CHECK(small.pop_all().size() == 3);
  // Killed while writing a batch of 4 at slots 3..6: every slot but the first stamped.
  for (uint64_t index = 4; index < 7; ++index) small.write_stamped(index);
  CHECK_FALSE(small.ring->has_data());
  CHECK(small.pop_all().empty());
  // The next producer publishes one record at slot 3: the consumer takes that one alone, not the
  // dead batch's slots after it (their stamps are right for their indices).
  small.ring->take_over_producer();
  CHECK(small.ring->produced() == 3);
  small.push(4, 1);
  std::vector<Report> got = small.pop_all();
  REQUIRE(got.size() == 1);
  CHECK(is_stamped(got[0], 4));
  CHECK(small.pop_all().empty());
  small.push(5, 3);
  got = small.pop_all();
  REQUIRE(got.size() == 3);
  for (uint64_t i = 0; i < 3; ++i) CHECK(is_stamped(got[i], 5 + i));
}

}  // namespace hugepin
