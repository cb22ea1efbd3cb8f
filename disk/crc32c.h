// CRC32C (Castagnoli, the iSCSI and ext4 checksum): the per-chunk checksum of snapshots.
//
// x86 SSE4.2 has an instruction for it (crc32, 8 bytes per step); machines without it get a
// slicing-by-8 table. The choice is made once, at run time (__builtin_cpu_supports), so one
// binary serves both. Thread-safe: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace hugepin {

// The CRC32C of `bytes` bytes at `data`, continuing from `crc`, the CRC32C of the bytes before
// them (0 for none): crc32c(b, crc32c(a)) == crc32c(a followed by b).
uint32_t crc32c(const void* data, size_t bytes, uint32_t crc = 0);

// The CRC32C of each `chunk_bytes` piece of [data, data + bytes), in order, into `out` (the last
// piece may be shorter). Faster than one crc32c() per piece: it runs three pieces at once, since
// the instruction's latency is three times its throughput.
// REQUIRES: chunk_bytes > 0; out.size() == ceil(bytes / chunk_bytes).
void crc32c_chunks(const void* data, uint64_t bytes, uint64_t chunk_bytes, std::span<uint32_t> out);

// True when crc32c() uses the SSE4.2 instruction on this machine.
bool crc32c_uses_hardware();

namespace detail {
// The two implementations, for tests that compare them on any machine.
uint32_t crc32c_table(const void* data, size_t bytes, uint32_t crc);
// REQUIRES: crc32c_uses_hardware().
uint32_t crc32c_sse42(const void* data, size_t bytes, uint32_t crc);
}  // namespace detail

}  // namespace hugepin
