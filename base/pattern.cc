#include "base/pattern.h"

namespace hugepin {

void fill_pattern(void* data, size_t bytes, uint64_t seed, uint64_t first_word) {
  auto* words = static_cast<uint64_t*>(data);
  size_t count = bytes / sizeof(uint64_t);
  for (size_t i = 0; i < count; ++i) words[i] = mix64(seed + first_word + i);
}

std::optional<size_t> find_pattern_mismatch(const void* data, size_t bytes, uint64_t seed,
                                            uint64_t first_word) {
  const auto* words = static_cast<const uint64_t*>(data);
  size_t count = bytes / sizeof(uint64_t);
  for (size_t i = 0; i < count; ++i) {
    if (words[i] != mix64(seed + first_word + i)) return i * sizeof(uint64_t);
  }
  return std::nullopt;
}

}  // namespace hugepin
