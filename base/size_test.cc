#include "base/size.h"

#include <doctest/doctest.h>

namespace hugepin {

TEST_CASE("parse_size accepts plain numbers and binary suffixes") {
  CHECK(parse_size("0") == 0u);
  CHECK(parse_size("1048576") == 1048576u);
  CHECK(parse_size("4K") == 4096u);
  CHECK(parse_size("4k") == 4096u);
  CHECK(parse_size("2M") == 2 * kMiB);
  CHECK(parse_size("2MiB") == 2 * kMiB);
  CHECK(parse_size("2mb") == 2 * kMiB);
  CHECK(parse_size("1G") == kGiB);
  CHECK(parse_size("1024M") == kGiB);
  CHECK(parse_size("3T") == 3 * kTiB);
  CHECK(parse_size("7B") == 7u);
}

TEST_CASE("parse_size rejects what is not a size") {
  CHECK_FALSE(parse_size(""));
  CHECK_FALSE(parse_size("G"));
  CHECK_FALSE(parse_size("-1G"));
  CHECK_FALSE(parse_size("1.5G"));
  CHECK_FALSE(parse_size("12Q"));
  CHECK_FALSE(parse_size("1 G"));
  CHECK_FALSE(parse_size("1Gi"));
  CHECK_FALSE(parse_size("1GiBs"));
}

TEST_CASE("parse_size refuses to overflow 64 bits") {
  CHECK(parse_size("18446744073709551615") == UINT64_MAX);
  CHECK_FALSE(parse_size("18446744073709551616"));
  CHECK(parse_size("16777215T") == 16777215 * kTiB);
  CHECK_FALSE(parse_size("16777216T"));
}

TEST_CASE("format_bytes picks the largest unit that keeps the value at least 1") {
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(1023) == "1023 B");
  CHECK(format_bytes(1024) == "1.00 KiB");
  CHECK(format_bytes(16 * kGiB) == "16.00 GiB");
  CHECK(format_bytes(3 * kMiB / 2) == "1.50 MiB");
}

TEST_CASE("page_size_name names exact multiples") {
  CHECK(page_size_name(4 * kKiB) == "4K");
  CHECK(page_size_name(2 * kMiB) == "2M");
  CHECK(page_size_name(kGiB) == "1G");
  CHECK(page_size_name(1536 * kKiB) == "1536K");
  CHECK(page_size_name(100) == "100B");
}

TEST_CASE("round_up rounds to the alignment and reports overflow") {
  CHECK(round_up(0, 4096) == 0u);
  CHECK(round_up(1, 4096) == 4096u);
  CHECK(round_up(4096, 4096) == 4096u);
  CHECK(round_up(3 * kMiB, 2 * kMiB) == 4 * kMiB);
  CHECK_FALSE(round_up(UINT64_MAX - 10, 4096));
}

}  // namespace hugepin
