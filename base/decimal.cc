#include "base/decimal.h"

#include <cctype>
#include <string>

namespace hugepin {

std::optional<uint64_t> parse_decimal_with_unit(std::string_view text, UnitValue unit_value, uint64_t max) {
  size_t digits = 0;
  uint64_t number = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) {
    const uint64_t digit = static_cast<uint64_t>(text[digits] - '0');
    if (number > (UINT64_MAX - digit) / 10) return std::nullopt;
    number = number * 10 + digit;
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  std::string unit;
  for (char c : text.substr(digits)) unit.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  const std::optional<uint64_t> value = unit_value(unit);
  if (!value) return std::nullopt;
  if (number != 0 && number > max / *value) return std::nullopt;
  return number * *value;
}

}  // namespace hugepin
