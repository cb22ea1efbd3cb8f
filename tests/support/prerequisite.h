// What a gated test binary needs of the machine, and how to play a machine without it. Apart from
// gate.h, whose run_or_skip carries doctest's implementation: an ordinary test binary may ask
// whether a prerequisite is there (to expect one backend or another) without linking a second one.
#pragma once

#include <string>
#include <string_view>

namespace hugepin::test {

// The environment variable that plays a machine without some prerequisites: a comma-separated
// list of their names ("io_uring,O_DIRECT"). How the skip path of a gated binary is tested on a
// machine that has everything (each GATED test's <name>_skips test, cmake/ExpectSkip.cmake).
inline constexpr const char* kPretendMissingVariable = "HUGEPIN_TEST_MISSING";

// True when HUGEPIN_TEST_MISSING names `prerequisite`. A prerequisite check calls it first and,
// when true, reports the prerequisite missing without looking at the machine.
bool pretend_missing(std::string_view prerequisite);

// What a check reports when pretend_missing(prerequisite) holds: "<needs> (HUGEPIN_TEST_MISSING
// names <prerequisite>)".
std::string pretended(std::string_view prerequisite, std::string_view needs);

}  // namespace hugepin::test
