// A producer killed with SIGKILL at random points, mid-batch included: the consumer sees whole
// records only, none twice, none missing, and the next producer continues the sequence.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <vector>

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

// Every field follows from the sequence, so a torn record cannot pass.
Report stamped(uint64_t sequence) {
  uint64_t value = mix(kSeed ^ sequence);
  return Report{ReportKind::kComputeRelease, 3, static_cast<uint32_t>(value), sequence, value, ~value};
}

bool is_stamped(const Report& report, uint64_t sequence) {
  Report expected = stamped(sequence);
  return std::memcmp(&report, &expected, sizeof(Report)) == 0;
}

// The producer: continues from what the ring has published, in batches of 1..300, until killed.
[[noreturn]] void produce_forever(ReportRing* ring, uint64_t round) {
  std::mt19937_64 random(kSeed + round);
  std::vector<Report> batch;
  uint64_t next = ring->produced() + 1;
  for (;;) {
    batch.clear();
    const size_t size = 1 + random() % 300;
    for (size_t i = 0; i < size; ++i) batch.push_back(stamped(next + i));
    next += ring->push_wait(real_os(), batch.data(), static_cast<uint32_t>(size), -1);
  }
}

struct Consumer {
  ReportRing* ring;
  uint64_t expected = 1;
  uint64_t bad = 0;
  std::vector<Report> out = std::vector<Report>(512);

  // Pops what is there now; returns how many.
  uint32_t drain_once() {
    uint32_t n = ring->pop_batch(real_os(), out.data(), static_cast<uint32_t>(out.size()));
    for (uint32_t i = 0; i < n; ++i, ++expected) {
      if (!is_stamped(out[i], expected)) ++bad;
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
  }
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
  std::vector<Report> next = {stamped(4), stamped(5)};
  REQUIRE(ring->push_batch(os, next.data(), 2) == 2);
  REQUIRE(ring->pop_batch(os, out, 8) == 2);
  CHECK(is_stamped(out[0], 4));
  CHECK(is_stamped(out[1], 5));
  munmap(memory, bytes);
}

}  // namespace hugepin
