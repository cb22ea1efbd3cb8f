#pragma once

// Which prefetch the report ring's producer issues for the free slots past a batch
// (ReportRing::kPrefetchAhead). Chosen at run time, by the CPU's vendor, because the hint that
// doubles the ring's rate in batches on one machine halves it on another, and one build serves
// both. Measured in batches of 32, M reports/s, with `hugepin bench ring --prefetch KIND`, the
// kinds alternating in one binary (fifteenth session; docs/performance.md):
//   - Intel Sapphire Rapids (the H200 host, KVM), four runs each: write 155.7-162.4 (1.12-1.32x
//     Boost), none 55.2-113.2 (0.40-0.89x), read 48.1-62.9 (0.35-0.45x). An older Intel Xeon
//     development VM (first sessions): read 112-126, write 92-96, none 83-91.
//   - AMD EPYC Zen 5 (the development VM since the thirteenth session, KVM), eight rounds over
//     three placements of its two vCPUs: read 114.9-132.3 where Boost makes 80-130 (and one run
//     of 69.5 whose placement moved), 68.8-70.5 where it makes about 78, 362.8-364.0 where it
//     makes 330-490; none 89.7-118.0, 69.1, 376.4; write 85.6-95.7, 49.0, 296.0-310.8.
// So: the read prefetch on AMD, the write prefetch everywhere else (the default on every CPU
// before, kept where nothing was measured, Arm included).

#include <optional>
#include <string>
#include <string_view>

namespace hugepin {

enum class RingPrefetch : unsigned char {
  kOff,    // no hint
  kRead,   // prefetcht0 (Arm: prfm pldl1keep)
  kWrite,  // prefetchw, the line fetched owned (Arm: prfm pstl1keep)
};

// "off", "read" or "write".
const char* ring_prefetch_name(RingPrefetch kind);
// The kind named `text` ("off", "read", "write"), or nothing.
std::optional<RingPrefetch> parse_ring_prefetch(std::string_view text);

// The CPU's vendor as CPUID names it ("GenuineIntel", "AuthenticAMD", ...); "" off x86.
std::string cpu_vendor();
// The kind a CPU of `vendor` gets unless told otherwise (the measurements above).
RingPrefetch default_ring_prefetch(std::string_view vendor);

// The kind every ring's producer in this process uses: the last set_ring_prefetch's, else
// default_ring_prefetch(cpu_vendor()), looked up once. Thread-safe; one relaxed load after the
// first call (the producer calls it once a batch).
RingPrefetch ring_prefetch();
// Makes every ring of this process (and of children forked after) use `kind`: for benchmarks that
// compare the kinds (`hugepin bench ring --prefetch`). A hint only: a ring's records are the same
// with any kind, so it may change while rings run.
void set_ring_prefetch(RingPrefetch kind);

}  // namespace hugepin
