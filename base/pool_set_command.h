// The command that grows the hugepage pool, as hugepin prints it for a pool that is short: in the
// errors of hugemem/ (pool_set_hint) and in the planner's fix lines. Pure.
#pragma once

#include <cstdint>
#include <string>

#include "base/error.h"
#include "base/size.h"

namespace hugepin {

// The `hugepin pool set` command line that makes the pool hold `pages` pages of `page_size` on
// NUMA node `node`, or, for node -1, on the whole system (split across the nodes).
inline std::string pool_set_command(uint64_t pages, int node, uint64_t page_size) {
  // page_size_name gives an exact "<n>M"/"<n>G" for whole multiples, which a page count always is.
  std::string line = cat("hugepin pool set ", page_size_name(pages * page_size));
  if (node >= 0) line += cat(" --node ", node);
  return line + cat(" --pagesize ", page_size_name(page_size));
}

}  // namespace hugepin
