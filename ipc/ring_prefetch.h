#pragma once

// Which prefetch the report ring's producer issues for the free slots past a batch
// (ReportRing::kPrefetchAhead). Chosen at run time, by the CPU's vendor, because the same hint
// that doubles the ring's rate in batches on one machine slows it on another, and one build serves
// both. Measured in batches of 32, M reports/s beside Boost.Lockfree's spsc_queue in the same runs
// (docs/performance.md):
//   - Intel Sapphire Rapids (the H200 host, KVM): write 170-185, none 86-106 (twelfth and
//     thirteenth sessions); an earlier Intel Xeon development VM: read 112-126, write 92-96,
//     none 83-91. Write (or read) beats none on Intel.
//   - AMD EPYC (the development VM since the thirteenth session, Zen 5, KVM): none beats write
//     in both placements its two vCPUs take (fifteenth session, alternating runs of one binary:
//     89-107 against 88-103 where Boost makes about 90, 256-294 against 213-248 where Boost
//     makes 390-435).
// So: no prefetch on AMD, the write prefetch everywhere else (the default on every CPU before,
// kept where nothing was measured, Arm included).

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
