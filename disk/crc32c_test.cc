// CRC32C against the vectors of RFC 3720 (B.4), both implementations, at every alignment.
#include "disk/crc32c.h"

#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <vector>

namespace hugepin {
namespace {

using Crc = uint32_t (*)(const void*, size_t, uint32_t);

std::vector<Crc> implementations() {
  std::vector<Crc> found{detail::crc32c_table};
  if (crc32c_uses_hardware()) found.push_back(detail::crc32c_sse42);
  return found;
}

}  // namespace

TEST_CASE("CRC32C matches RFC 3720 B.4 and the check value") {
  unsigned char zeros[32] = {};
  unsigned char ones[32];
  unsigned char up[32];
  unsigned char down[32];
  std::memset(ones, 0xff, sizeof ones);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<unsigned char>(i);
    down[i] = static_cast<unsigned char>(31 - i);
  }
  const unsigned char read_pdu[48] = {0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                      0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
                                      0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
                                      0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  for (Crc crc : implementations()) {
    CHECK(crc(zeros, sizeof zeros, 0) == 0x8A9136AA);
    CHECK(crc(ones, sizeof ones, 0) == 0x62A8AB43);
    CHECK(crc(up, sizeof up, 0) == 0x46DD794E);
    CHECK(crc(down, sizeof down, 0) == 0x113FDB5C);
    CHECK(crc(read_pdu, sizeof read_pdu, 0) == 0xD9963A56);
    CHECK(crc("123456789", 9, 0) == 0xE3069283);
    CHECK(crc("", 0, 0) == 0);
  }
  CHECK(crc32c("123456789", 9) == 0xE3069283);
}

TEST_CASE("CRC32C extends: the CRC of a + b continues from the CRC of a") {
  const char* text = "hello, hugepin: a longer text that crosses several 8-byte words";
  const size_t length = std::strlen(text);
  for (size_t split = 0; split <= length; ++split) {
    CAPTURE(split);
    CHECK(crc32c(text + split, length - split, crc32c(text, split)) == crc32c(text, length));
  }
}

TEST_CASE("both implementations agree at every alignment and length") {
  std::mt19937_64 random(3720);
  std::vector<unsigned char> data(4096 + 64);
  for (unsigned char& byte : data) byte = static_cast<unsigned char>(random());
  for (size_t start = 0; start < 16; ++start) {
    for (size_t length : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{63}, size_t{1000}, size_t{4096}}) {
      CAPTURE(start);
      CAPTURE(length);
      const uint32_t expected = detail::crc32c_table(data.data() + start, length, 0);
      CHECK(crc32c(data.data() + start, length) == expected);
      CHECK(crc32c(data.data() + start, length, 0x12345678) == detail::crc32c_table(data.data() + start, length, 0x12345678));
    }
  }
}

TEST_CASE("crc32c_chunks gives each chunk's CRC, the short last one included") {
  std::mt19937_64 random(7);
  const uint64_t chunk = 4096;
  for (uint64_t chunks_bytes : {chunk, 2 * chunk, 3 * chunk, 7 * chunk, 7 * chunk + 512, 9 * chunk - 8}) {
    CAPTURE(chunks_bytes);
    std::vector<unsigned char> data(chunks_bytes);
    for (unsigned char& byte : data) byte = static_cast<unsigned char>(random());
    std::vector<uint32_t> out((chunks_bytes + chunk - 1) / chunk);
    crc32c_chunks(data.data(), chunks_bytes, chunk, out);
    for (size_t i = 0; i < out.size(); ++i) {
      CAPTURE(i);
      const uint64_t bytes = std::min<uint64_t>(chunk, chunks_bytes - i * chunk);
      CHECK(out[i] == detail::crc32c_table(data.data() + i * chunk, bytes, 0));
    }
  }
}

}  // namespace hugepin
