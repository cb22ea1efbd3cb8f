#include "base/duration.h"

#include <array>
#include <cctype>
#include <cstdint>
#include <utility>

#include "base/error.h"

namespace hugepin {
namespace {

constexpr std::array<std::pair<std::string_view, int64_t>, 5> kUnits{{
    {"d", 86'400 * kNanosPerSecond},
    {"h", 3'600 * kNanosPerSecond},
    {"m", 60 * kNanosPerSecond},
    {"s", kNanosPerSecond},
    {"ms", kNanosPerMilli},
}};

std::optional<int64_t> unit_nanos(std::string_view suffix) {
  std::string lower;
  for (char c : suffix) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (lower.empty()) return kNanosPerSecond;
  for (auto [name, nanos] : kUnits) {
    if (lower == name) return nanos;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> parse_duration(std::string_view text) {
  size_t digits = 0;
  int64_t value = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) {
    const int64_t digit = text[digits] - '0';
    if (value > (INT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  std::optional<int64_t> unit = unit_nanos(text.substr(digits));
  if (!unit) return std::nullopt;
  if (value != 0 && value > INT64_MAX / *unit) return std::nullopt;
  return value * *unit;
}

std::string format_duration(int64_t nanos) {
  if (nanos <= 0) return "0";
  for (auto [name, unit] : kUnits) {
    if (nanos % unit == 0) return cat(nanos / unit, name);
  }
  return cat(nanos / kNanosPerMilli, "ms");
}

}  // namespace hugepin
