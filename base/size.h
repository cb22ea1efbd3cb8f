// Byte sizes as users write them ("4G", "512MiB", "6.4e10") and as hugepin prints them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hugepin {

inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * kKiB;
inline constexpr uint64_t kGiB = 1024 * kMiB;
inline constexpr uint64_t kTiB = 1024 * kGiB;

// Parses a size with an optional binary suffix: K, M, G, T or KiB, MiB, GiB, TiB (case-insensitive,
// "B" alone allowed; every suffix is a power of 1024, as hugepage sizes are). The number is a
// non-negative integer. Returns nullopt for anything else, including overflow of 64 bits.
std::optional<uint64_t> parse_size(std::string_view text);

// "16.00 GiB", "2.00 MiB", "512 B": the largest binary unit that keeps the value >= 1.
std::string format_bytes(uint64_t bytes);

// "4K", "2M", "1G": the short name of a page size (exact multiples only; otherwise "<n>B").
std::string page_size_name(uint64_t page_size);

// Rounds `bytes` up to a multiple of `alignment` (a power of two). Returns nullopt on overflow.
std::optional<uint64_t> round_up(uint64_t bytes, uint64_t alignment);

}  // namespace hugepin
