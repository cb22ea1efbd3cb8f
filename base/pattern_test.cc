#include "base/pattern.h"

#include <doctest/doctest.h>

#include <vector>

namespace hugepin {

TEST_CASE("a filled pattern checks clean and a flipped byte is found at its word") {
  std::vector<uint64_t> words(4096);
  fill_pattern(words.data(), words.size() * 8, 7);
  CHECK_FALSE(find_pattern_mismatch(words.data(), words.size() * 8, 7));
  reinterpret_cast<unsigned char*>(words.data())[8 * 1000 + 3] ^= 0x10;
  CHECK(find_pattern_mismatch(words.data(), words.size() * 8, 7) == size_t{8 * 1000});
}

TEST_CASE("patterns of different seeds and offsets differ") {
  std::vector<uint64_t> a(64), b(64);
  fill_pattern(a.data(), 512, 1);
  fill_pattern(b.data(), 512, 2);
  CHECK(find_pattern_mismatch(a.data(), 512, 2) == size_t{0});
  // A pattern is addressable by word: the second half starts at word 32.
  CHECK_FALSE(find_pattern_mismatch(a.data() + 32, 256, 1, 32));
}

}  // namespace hugepin
