#include "base/duration.h"

#include <doctest/doctest.h>

namespace hugepin {

TEST_CASE("durations parse with units, a bare number is seconds") {
  CHECK(parse_duration("0") == 0);
  CHECK(parse_duration("90") == 90 * kNanosPerSecond);
  CHECK(parse_duration("90s") == 90 * kNanosPerSecond);
  CHECK(parse_duration("250ms") == 250 * kNanosPerMilli);
  CHECK(parse_duration("5m") == 300 * kNanosPerSecond);
  CHECK(parse_duration("24H") == 86'400 * kNanosPerSecond);
  CHECK(parse_duration("7d") == 7 * 86'400 * kNanosPerSecond);
}

TEST_CASE("durations refuse signs, fractions, unknown units and overflow") {
  for (const char* bad : {"", "s", "-1s", "1.5s", "10 s", "3w", "1sec", "99999999999d", "9223372036854775808"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_duration(bad).has_value());
  }
}

TEST_CASE("format_duration writes the shortest exact unit") {
  CHECK(format_duration(0) == "0");
  CHECK(format_duration(86'400 * kNanosPerSecond) == "1d");
  CHECK(format_duration(90 * kNanosPerSecond) == "90s");
  CHECK(format_duration(120 * kNanosPerSecond) == "2m");
  CHECK(format_duration(250 * kNanosPerMilli) == "250ms");
  CHECK(parse_duration(format_duration(36 * 3600 * kNanosPerSecond)) == 36 * 3600 * kNanosPerSecond);
}

}  // namespace hugepin
