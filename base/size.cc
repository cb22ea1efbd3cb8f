#include "base/size.h"

#include <array>
#include <cctype>
#include <cstdio>

namespace hugepin {
namespace {

std::optional<uint64_t> suffix_multiplier(std::string_view suffix) {
  std::string lower;
  for (char c : suffix) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (lower.empty() || lower == "b") return 1;
  static constexpr std::array<std::pair<char, uint64_t>, 4> kUnits{
      {{'k', kKiB}, {'m', kMiB}, {'g', kGiB}, {'t', kTiB}}};
  for (auto [letter, multiplier] : kUnits) {
    if (lower[0] != letter) continue;
    std::string_view rest = std::string_view(lower).substr(1);
    if (rest.empty() || rest == "b" || rest == "ib") return multiplier;
  }
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> parse_size(std::string_view text) {
  size_t digits = 0;
  uint64_t value = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) {
    uint64_t digit = static_cast<uint64_t>(text[digits] - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  std::optional<uint64_t> multiplier = suffix_multiplier(text.substr(digits));
  if (!multiplier) return std::nullopt;
  if (value != 0 && value > UINT64_MAX / *multiplier) return std::nullopt;
  return value * *multiplier;
}

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
