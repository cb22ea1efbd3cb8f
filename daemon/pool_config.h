// Hugepage reservations from hugepind's configuration: the [pool] section (`2M.node0 = 4096`,
// `1G = 16`), HUGEPIN_POOL or --pool ("2M.node0=4096,1G=16"). `hugepin pool apply` sets them at
// boot (hugepin-pool.service), early, before memory fragments.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/os.h"
#include "hugemem/pool.h"

namespace hugepin::daemon {

// `pages` pages of `page_size` on `node`, or split evenly over every node when there is none.
struct PoolEntry {
  uint64_t page_size = 0;
  std::optional<int> node;
  uint64_t pages = 0;
};

// One entry from its key ("2M.node0", "1G") and page count ("4096"). Throws Error naming the text:
// a page size that is not a power of two above 4 KiB, a node that is not "node<N>", a count that
// is not a whole number.
PoolEntry parse_pool_entry(std::string_view key, std::string_view pages);

// The comma-separated form ("2M.node0=4096,1G=16"; "" is none). Throws Error naming the entry
// that does not parse, or two entries for the same page size and node (or one split over every
// node and one for a single node of the same size).
std::vector<PoolEntry> parse_pool_list(std::string_view text);

// "2M.node0=4096", "1G=16": the form parse_pool_list reads.
std::string format_pool_entry(const PoolEntry& entry);
std::string format_pool_list(const std::vector<PoolEntry>& entries);

// Sets each entry's pool with set_pool, in order, and returns every node's change. Throws Error
// (as set_pool does) for a page size or node the kernel does not have; a shortfall is not thrown
// (shortfall_message reports it).
std::vector<PoolChange> apply_pool_entries(Os& os, const std::vector<PoolEntry>& entries);

}  // namespace hugepin::daemon
