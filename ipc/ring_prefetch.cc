#include "ipc/ring_prefetch.h"

#include <atomic>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace hugepin {
namespace {

// The kind in use, or kUnresolved before the first ring_prefetch() or set_ring_prefetch().
constexpr unsigned char kUnresolved = 0xff;
std::atomic<unsigned char> current_kind{kUnresolved};

}  // namespace

const char* ring_prefetch_name(RingPrefetch kind) {
  switch (kind) {
    case RingPrefetch::kOff: return "off";
    case RingPrefetch::kRead: return "read";
    case RingPrefetch::kWrite: return "write";
  }
  return "off";
}

std::optional<RingPrefetch> parse_ring_prefetch(std::string_view text) {
  for (RingPrefetch kind : {RingPrefetch::kOff, RingPrefetch::kRead, RingPrefetch::kWrite}) {
    if (text == ring_prefetch_name(kind)) return kind;
  }
  return std::nullopt;
}

std::string cpu_vendor() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return "";
  // Leaf 0 spells the vendor in EBX, EDX, ECX, in that order.
  char vendor[12];
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  return std::string(vendor, sizeof(vendor));
#else
  return "";
#endif
}

RingPrefetch default_ring_prefetch(std::string_view vendor) {
  return vendor == "AuthenticAMD" ? RingPrefetch::kRead : RingPrefetch::kWrite;
}

RingPrefetch ring_prefetch() {
  unsigned char kind = current_kind.load(std::memory_order_relaxed);
  if (kind == kUnresolved) {
    // Two threads may both look it up: they find the same answer, and one set_ring_prefetch()
    // in between wins.
    unsigned char expected = kUnresolved;
    const auto found = static_cast<unsigned char>(default_ring_prefetch(cpu_vendor()));
    current_kind.compare_exchange_strong(expected, found, std::memory_order_relaxed);
    kind = current_kind.load(std::memory_order_relaxed);
  }
  return static_cast<RingPrefetch>(kind);
}

void set_ring_prefetch(RingPrefetch kind) {
  current_kind.store(static_cast<unsigned char>(kind), std::memory_order_relaxed);
}

}  // namespace hugepin
