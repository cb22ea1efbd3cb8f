#include "base/size.h"

#include <array>
#include <cstdio>

#include "base/decimal.h"

namespace hugepin {
namespace {

std::optional<uint64_t> suffix_multiplier(std::string_view suffix) {
  if (suffix.empty() || suffix == "b") return 1;
  static constexpr std::array<std::pair<char, uint64_t>, 4> kUnits{
      {{'k', kKiB}, {'m', kMiB}, {'g', kGiB}, {'t', kTiB}}};
  for (auto [letter, multiplier] : kUnits) {
    if (suffix[0] != letter) continue;
    std::string_view rest = suffix.substr(1);
    if (rest.empty() || rest == "b" || rest == "ib") return multiplier;
  }
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> parse_size(std::string_view text) { return parse_decimal_with_unit(text, suffix_multiplier, UINT64_MAX); }

std::string format_bytes(uint64_t bytes) {
  static constexpr std::array<const char*, 5> kNames{"B", "KiB", "MiB", "GiB", "TiB"};
  size_t unit = 0;
  double value = static_cast<double>(bytes);
  while (unit + 1 < kNames.size() && value >= 1024.0) {
    value /= 1024.0;
    ++unit;
  }
  char text[48];
  if (unit == 0) {
    std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(text, sizeof text, "%.2f %s", value, kNames[unit]);
  }
  return text;
}

std::string page_size_name(uint64_t page_size) {
  static constexpr std::array<std::pair<uint64_t, char>, 3> kUnits{
      {{kGiB, 'G'}, {kMiB, 'M'}, {kKiB, 'K'}}};
  for (auto [unit, letter] : kUnits) {
    if (page_size >= unit && page_size % unit == 0) return std::to_string(page_size / unit) + letter;
  }
  return std::to_string(page_size) + "B";
}

std::optional<uint64_t> round_up(uint64_t bytes, uint64_t alignment) {
  uint64_t mask = alignment - 1;
  if (bytes > UINT64_MAX - mask) return std::nullopt;
  return (bytes + mask) & ~mask;
}

}  // namespace hugepin
