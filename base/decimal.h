// Whole decimal numbers with a unit, as users write sizes ("512MiB") and durations ("90s"): the
// one parser behind parse_size (base/size.h) and parse_duration (base/duration.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace hugepin {

// What one `unit` is worth (bytes, nanoseconds), given the unit in lower case ("" when the text
// has none); nullopt for a unit the caller does not know.
using UnitValue = std::optional<uint64_t> (*)(std::string_view unit);

// Parses "<digits><unit>": a non-negative whole decimal number followed directly by a unit that
// `unit_value` knows. Returns the number times the unit's value, or nullopt for anything else: no
// digits, a sign, a fraction, a space, an unknown unit, and a result above `max` (the digits alone
// may not overflow 64 bits either).
std::optional<uint64_t> parse_decimal_with_unit(std::string_view text, UnitValue unit_value, uint64_t max);

}  // namespace hugepin
