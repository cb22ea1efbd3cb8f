// Durations as users write them in options and configuration ("90s", "5m", "24h", "250ms").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hugepin {

inline constexpr int64_t kNanosPerMilli = 1'000'000;
inline constexpr int64_t kNanosPerSecond = 1'000'000'000;

// Parses a non-negative whole number with an optional unit: ms, s, m, h or d (case-insensitive);
// a bare number is seconds ("0" is zero). Returns the duration in nanoseconds, or nullopt for
// anything else, including a negative number, a fraction, and overflow of 64 bits.
std::optional<int64_t> parse_duration(std::string_view text);

// The shortest exact spelling of `nanos` in the units parse_duration takes ("24h", "90s",
// "250ms"); "0" for zero; sub-millisecond remainders are written in ms, rounded down.
std::string format_duration(int64_t nanos);

}  // namespace hugepin
