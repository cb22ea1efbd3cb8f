#include "base/duration.h"

#include <array>
#include <cstdint>
#include <utility>

#include "base/decimal.h"
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

std::optional<uint64_t> unit_nanos(std::string_view unit) {
  if (unit.empty()) return static_cast<uint64_t>(kNanosPerSecond);
  for (auto [name, nanos] : kUnits) {
    if (unit == name) return static_cast<uint64_t>(nanos);
  }
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> parse_duration(std::string_view text) {
  std::optional<uint64_t> nanos = parse_decimal_with_unit(text, unit_nanos, INT64_MAX);
  if (!nanos) return std::nullopt;
  return static_cast<int64_t>(*nanos);
}

std::string format_duration(int64_t nanos) {
  if (nanos <= 0) return "0";
  for (auto [name, unit] : kUnits) {
    if (nanos % unit == 0) return cat(nanos / unit, name);
  }
  return cat(nanos / kNanosPerMilli, "ms");
}

}  // namespace hugepin
