#include "disk/crc32c.h"

#include <algorithm>
#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#include "base/contract.h"

namespace hugepin {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78;  // 0x1EDC6F41 bit-reversed

// tables[k][b]: the CRC register after byte b followed by k zero bytes (slicing-by-8).
using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables tables{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) != 0 ? kPolynomial : 0);
    tables[0][b] = crc;
  }
  for (size_t k = 1; k < 8; ++k) {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t previous = tables[k - 1][b];
      tables[k][b] = (previous >> 8) ^ tables[0][previous & 0xff];
    }
  }
  return tables;
}

constexpr Tables kTables = make_tables();

uint64_t load64(const unsigned char* p) {
  uint64_t word;
  std::memcpy(&word, p, sizeof word);
  return word;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint64_t sse42_bytes(uint64_t crc, const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) crc = _mm_crc32_u8(static_cast<uint32_t>(crc), p[i]);
  return crc;
}

// Three pieces of `bytes` bytes each, interleaved so that three crc32 instructions are in flight.
__attribute__((target("sse4.2"))) void sse42_three(const unsigned char* a, const unsigned char* b,
                                                   const unsigned char* c, size_t bytes, uint32_t* out) {
  uint64_t ca = 0xffffffff, cb = 0xffffffff, cc = 0xffffffff;
  const size_t words = bytes / 8;
  for (size_t i = 0; i < words; ++i) {
    ca = _mm_crc32_u64(ca, load64(a + 8 * i));
    cb = _mm_crc32_u64(cb, load64(b + 8 * i));
    cc = _mm_crc32_u64(cc, load64(c + 8 * i));
  }
  const size_t done = words * 8;
  out[0] = ~static_cast<uint32_t>(sse42_bytes(ca, a + done, bytes - done));
  out[1] = ~static_cast<uint32_t>(sse42_bytes(cb, b + done, bytes - done));
  out[2] = ~static_cast<uint32_t>(sse42_bytes(cc, c + done, bytes - done));
}
#endif

bool detect_hardware() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("sse4.2");
#else
  return false;
#endif
}

const bool kHardware = detect_hardware();

}  // namespace

namespace detail {

uint32_t crc32c_table(const void* data, size_t bytes, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  for (; bytes > 0 && reinterpret_cast<uintptr_t>(p) % 8 != 0; --bytes) c = kTables[0][(c ^ *p++) & 0xff] ^ (c >> 8);
  for (; bytes >= 8; bytes -= 8, p += 8) {
    uint64_t word = load64(p) ^ c;
    c = kTables[7][word & 0xff] ^ kTables[6][(word >> 8) & 0xff] ^ kTables[5][(word >> 16) & 0xff] ^
        kTables[4][(word >> 24) & 0xff] ^ kTables[3][(word >> 32) & 0xff] ^ kTables[2][(word >> 40) & 0xff] ^
        kTables[1][(word >> 48) & 0xff] ^ kTables[0][word >> 56];
  }
  for (; bytes > 0; --bytes) c = kTables[0][(c ^ *p++) & 0xff] ^ (c >> 8);
  return ~c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const void* data, size_t bytes, uint32_t crc) {
  HUGEPIN_REQUIRE(kHardware, "this CPU has no SSE4.2");
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t c = ~crc;
  size_t head = std::min<size_t>(bytes, (8 - reinterpret_cast<uintptr_t>(p) % 8) % 8);
  c = sse42_bytes(c, p, head);
  p += head;
  bytes -= head;
  for (; bytes >= 8; bytes -= 8, p += 8) c = _mm_crc32_u64(c, load64(p));
  return ~static_cast<uint32_t>(sse42_bytes(c, p, bytes));
}
#else
uint32_t crc32c_sse42(const void* data, size_t bytes, uint32_t crc) { return crc32c_table(data, bytes, crc); }
#endif

}  // namespace detail

bool crc32c_uses_hardware() { return kHardware; }

uint32_t crc32c(const void* data, size_t bytes, uint32_t crc) {
  return kHardware ? detail::crc32c_sse42(data, bytes, crc) : detail::crc32c_table(data, bytes, crc);
}

void crc32c_chunks(const void* data, uint64_t bytes, uint64_t chunk_bytes, std::span<uint32_t> out) {
  HUGEPIN_REQUIRE(chunk_bytes > 0);
  HUGEPIN_REQUIRE(out.size() == (bytes + chunk_bytes - 1) / chunk_bytes, out.size(), " checksums for ", bytes,
                  " bytes in chunks of ", chunk_bytes);
  const auto* base = static_cast<const unsigned char*>(data);
  const uint64_t full = bytes / chunk_bytes;  // chunks of exactly chunk_bytes
  uint64_t i = 0;
#if defined(__x86_64__)
  if (kHardware) {
    for (; i + 3 <= full; i += 3) {
      const unsigned char* first = base + i * chunk_bytes;
      sse42_three(first, first + chunk_bytes, first + 2 * chunk_bytes, chunk_bytes, &out[i]);
    }
  }
#endif
  for (; i * chunk_bytes < bytes; ++i) {
    out[i] = crc32c(base + i * chunk_bytes, std::min(chunk_bytes, bytes - i * chunk_bytes));
  }
}

}  // namespace hugepin
