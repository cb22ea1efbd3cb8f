#include "ipc/ring_stress.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "base/contract.h"
#include "base/cpu_relax.h"
#include "base/error.h"

namespace hugepin::test {
namespace {

// xorshift64*: small, fast, and the same sequence everywhere for a seed.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 0x2545F4914F6CDD1Dull;
  }
  uint32_t below(uint32_t bound) { return static_cast<uint32_t>(next() % bound); }

 private:
  uint64_t state_;
};

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

size_t rings_offset() { return sizeof(Doorbell); }

}  // namespace

Report stamp(uint64_t seed, uint32_t ring, uint64_t sequence) {
  uint64_t value = mix(seed ^ mix(ring + 1) ^ sequence);
  return Report{ReportKind::kCopyComplete, static_cast<uint16_t>(ring), static_cast<uint32_t>(value >> 32), sequence,
                value, mix(value)};
}

size_t stress_area_bytes(const StressConfig& config) {
  return rings_offset() + config.rings * ReportRing::memsize(config.capacity) + config.rings * sizeof(uint64_t);
}

StressArea build_stress_area(void* memory, const StressConfig& config) {
  HUGEPIN_REQUIRE(reinterpret_cast<uintptr_t>(memory) % kCacheLinePair == 0, "memory at ", memory);
  auto* base = static_cast<std::byte*>(memory);
  StressArea area;
  area.doorbell = new (base) Doorbell;
  const size_t ring_bytes = ReportRing::memsize(config.capacity);
  for (uint32_t i = 0; i < config.rings; ++i) {
    area.rings.push_back(ReportRing::init(base + rings_offset() + i * ring_bytes, config.capacity, area.doorbell));
  }
  area.sent = reinterpret_cast<uint64_t*>(base + rings_offset() + config.rings * ring_bytes);
  std::fill(area.sent, area.sent + config.rings, 0);
  return area;
}

void run_producer(Os& os, const StressArea& area, uint32_t ring_index, const StressConfig& config) {
  ReportRing& ring = *area.rings[ring_index];
  Random random(config.seed * 1000 + ring_index);
  std::vector<Report> batch;
  uint64_t sequence = 1;
  while (sequence <= config.records_per_ring) {
    uint64_t left = config.records_per_ring - sequence + 1;
    auto size = static_cast<uint32_t>(std::min<uint64_t>(1 + random.below(2 * config.capacity), left));
    batch.clear();
    for (uint32_t i = 0; i < size; ++i) batch.push_back(stamp(config.seed, ring_index, sequence + i));
    uint32_t written = 0;
    switch (random.below(3)) {
      case 0:  // wait for room on the space doorbell
        written = ring.push_wait(os, batch.data(), size, -1);
        break;
      case 1:  // spin until it all fits
        while (written < size) {
          uint32_t n = ring.push_batch(os, batch.data() + written, size - written);
          if (n == 0) cpu_relax();
          written += n;
        }
        break;
      default:  // take what fits now; the rest is stamped again next time round
        written = ring.push_batch(os, batch.data(), size);
        break;
    }
    sequence += written;
  }
  area.sent[ring_index] = sequence - 1;
}

StressResult run_consumer(Os& os, const StressArea& area, const StressConfig& config) {
  const auto ring_count = static_cast<uint32_t>(area.rings.size());
  StressResult result;
  result.received.assign(ring_count, 0);
  Random random(config.seed * 7919);
  std::vector<Report> out(2 * config.capacity);
  const uint64_t total = config.records_per_ring * ring_count;
  uint64_t received = 0;
  auto fail = [&](std::string message) {
    ++result.bad_records;
    if (result.first_error.empty()) result.first_error = std::move(message);
  };
  while (received < total) {
    if (!wait_for_any(os, *area.doorbell, area.rings, 30'000'000'000, random.below(2) * 64)) {
      fail(cat("no record for 30 s after ", received, " of ", total));
      break;
    }
    for (uint32_t r = 0; r < ring_count; ++r) {
      uint32_t n = area.rings[r]->pop_batch(os, out.data(), 1 + random.below(2 * config.capacity));
      for (uint32_t i = 0; i < n; ++i) {
        uint64_t expected_sequence = result.received[r] + 1;
        Report expected = stamp(config.seed, r, expected_sequence);
        if (std::memcmp(&out[i], &expected, sizeof(Report)) != 0) {
          fail(cat("ring ", r, ": got sequence ", out[i].sequence, " value ", out[i].value, ", expected sequence ",
                   expected_sequence, " value ", expected.value));
        }
        ++result.received[r];
      }
      received += n;
    }
  }
  return result;
}

}  // namespace hugepin::test
