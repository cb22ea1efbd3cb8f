// Choosing what backs a region: the page-size fallback chain 1 GiB -> 2 MiB -> 4 KiB shared
// memory, decided from the pool as read (data in, data out: tests feed recorded pools).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "hugemem/pool.h"

namespace hugepin {

struct RegionRequest {
  uint32_t rank = 0;
  uint64_t bytes = 0;
  int node = -1;  // -1: no preference
};

struct ArenaOptions {
  uint64_t page_size = 0;         // 0: best available (1G, then 2M, then 4K shared memory)
  bool strict = false;            // any fallback (page size, node) is an error, not a warning
  unsigned prefault_threads = 0;  // per node; 0: the node's CPUs, at most 16
  std::string hugetlbfs_dir;      // a mount to use; empty: the one /proc/mounts lists for the size
  std::string shm_dir = "/dev/shm";
  mode_t mode = 0600;             // region files (0660 when a group is given)
  std::optional<gid_t> group;
};

struct BackingChoice {
  uint64_t page_size = 0;
  std::string root_dir;  // the hugetlbfs mount, or the shm dir for 4 KiB pages
  // Why the region got less than it asked for (a smaller page size than wanted); "" otherwise.
  std::string fallback;
  // The fallback is 4 KiB because no hugepages are reserved at all (one warning per arena does).
  bool no_pool = false;
};

// Pages already promised to earlier regions of the same arena: (node, page size) -> pages.
using PagesTaken = std::map<std::pair<int, uint64_t>, uint64_t>;

// Chooses the backing of one region and records the pages it takes in `taken`. Throws Error when
// the choice is a fallback and `options.strict` is set, or when `options.page_size` is not one
// of 4K, 2M, 1G or a size the kernel supports.
BackingChoice choose_backing(const PoolState& pool, const RegionRequest& request,
                             const ArenaOptions& options, PagesTaken& taken);

}  // namespace hugepin
