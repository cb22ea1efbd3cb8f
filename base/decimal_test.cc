#include "base/decimal.h"

#include <doctest/doctest.h>

#include <string>

namespace hugepin {
namespace {

// "" is worth 1, "x" 10, "big" 2^62; the unit arrives in lower case.
std::optional<uint64_t> test_units(std::string_view unit) {
  if (unit.empty()) return 1;
  if (unit == "x") return 10;
  if (unit == "big") return uint64_t{1} << 62;
  return std::nullopt;
}

std::optional<uint64_t> parse(std::string_view text, uint64_t max = UINT64_MAX) {
  return parse_decimal_with_unit(text, test_units, max);
}

}  // namespace

TEST_CASE("a decimal number with a unit: the number times the unit's value, the unit in any case") {
  CHECK(parse("0") == 0u);
  CHECK(parse("007") == 7u);
  CHECK(parse("12x") == 120u);
  CHECK(parse("12X") == 120u);
  CHECK(parse("3BiG") == 3 * (uint64_t{1} << 62));
  CHECK(parse("0big", 0) == 0u);  // zero of any unit fits
}

TEST_CASE("no digits, signs, fractions, spaces and unknown units are refused") {
  for (const char* bad : {"", "x", "-1", "+1", "1.5", "1 x", " 1", "1y", "1xx"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse(bad).has_value());
  }
}

TEST_CASE("the digits must fit 64 bits and the result the maximum") {
  CHECK(parse("18446744073709551615") == UINT64_MAX);
  CHECK_FALSE(parse("18446744073709551616"));
  CHECK(parse("4big") == std::nullopt);  // 2^64
  CHECK(parse("100x", 1000) == 1000u);
  CHECK_FALSE(parse("101x", 1000));
  CHECK_FALSE(parse("1001", 1000));
}

}  // namespace hugepin
