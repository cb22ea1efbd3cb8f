#include "hugemem/naming.h"

#include <cctype>
#include <charconv>

#include "base/error.h"

namespace hugepin {

bool is_valid_arena_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxArenaNameLength || name.front() == '.') return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

void check_arena_name(std::string_view name) {
  if (!is_valid_arena_name(name)) {
    throw Error(cat("invalid arena name '", name, "': use 1-", kMaxArenaNameLength,
                    " letters, digits, '.', '_' or '-', not starting with '.'"));
  }
}

std::string arena_data_dir(std::string_view root_dir, std::string_view arena) {
  return cat(root_dir, "/", kDataDirName, "/", arena);
}

TrustedPath arena_data_location(std::string_view root_dir, std::string_view arena) {
  return {std::string(root_dir), cat(kDataDirName, "/", arena)};
}

TrustedPath region_location(std::string_view root_dir, std::string_view arena, uint32_t rank) {
  return arena_data_location(root_dir, arena).child(region_file_name(rank));
}

std::string region_file_name(uint32_t rank) { return cat("rank-", rank); }

std::optional<uint32_t> parse_region_file_name(std::string_view file_name) {
  constexpr std::string_view kPrefix = "rank-";
  if (file_name.substr(0, kPrefix.size()) != kPrefix || file_name.size() == kPrefix.size()) {
    return std::nullopt;
  }
  uint32_t rank = 0;
  const char* first = file_name.data() + kPrefix.size();
  const char* last = file_name.data() + file_name.size();
  auto [end, ec] = std::from_chars(first, last, rank);
  if (ec != std::errc() || end != last || (*first == '0' && last - first > 1)) return std::nullopt;
  return rank;
}

namespace {
constexpr std::string_view kSegmentPrefix = "hugepin.";
}  // namespace

std::string control_segment_name(std::string_view arena) { return cat(kSegmentPrefix, arena); }

std::string control_segment_path(std::string_view arena) { return cat(kControlSegmentDir, "/", kSegmentPrefix, arena); }

std::string arena_of_segment_file(std::string_view file_name) {
  if (file_name.substr(0, kSegmentPrefix.size()) != kSegmentPrefix) return "";
  std::string_view arena = file_name.substr(kSegmentPrefix.size());
  return is_valid_arena_name(arena) ? std::string(arena) : "";
}

}  // namespace hugepin
