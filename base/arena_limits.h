// Limits of an arena that several layers check on their own and must agree on: the CLI's --ranks,
// hugepind's requests, the planner's tp * pp and the control segment's header. Here, below all of
// them, so that the planner, which is pure, needs no hugemem/ header for it.
#pragma once

#include <cstdint>

namespace hugepin {

// Most ranks an arena may have.
inline constexpr uint32_t kMaxArenaRanks = 65536;

}  // namespace hugepin
