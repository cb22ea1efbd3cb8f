// Stamped data patterns: every 8-byte word is a function of a seed and its offset, so a reader
// in another process can check every byte and say where the first wrong one is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace hugepin {

// splitmix64: a fast, well-mixed 64-bit hash; the pattern's word at index i is mix(seed + i).
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Fills `bytes` bytes at `data` (8-byte aligned, a multiple of 8) with the pattern of `seed`,
// whose first word has index `first_word`.
void fill_pattern(void* data, size_t bytes, uint64_t seed, uint64_t first_word = 0);

// The byte offset of the first word that differs from the pattern, or nullopt when all match.
std::optional<size_t> find_pattern_mismatch(const void* data, size_t bytes, uint64_t seed,
                                            uint64_t first_word = 0);

}  // namespace hugepin
