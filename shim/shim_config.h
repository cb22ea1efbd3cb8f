// What the shim does, decided once from the HUGEPIN_* options (base/options.h) and the rank
// variables launchers set (LOCAL_RANK, RANK).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/options.h"

namespace hugepin {

struct ShimConfig {
  bool disabled = false;
  uint64_t min_bytes = 0;
  std::string arena;          // "" : private mappings
  uint32_t rank = 0;
  std::string rank_source;    // which variable gave the rank ("HUGEPIN_RANK", "LOCAL_RANK", "RANK", "default")
  uint64_t page_size = 0;     // private mappings: 0 for auto, else 2 MiB or 1 GiB
  std::string hugetlbfs_dir;  // "" : the mount /proc/mounts lists
  std::string shm_dir;
  bool strict = false;
  log::Level log_level = log::Level::kWarn;
  std::string sysroot;
};

// The configuration `options` give. The rank is HUGEPIN_RANK when set, else LOCAL_RANK, else RANK
// (read from `source`), else 0; a rank variable that is not a number from 0 to 65535 is skipped
// with a line added to `problems`.
ShimConfig make_shim_config(const Options& options, const OptionSource& source, std::vector<std::string>* problems);

// A hugepage size a private mapping may use, as the pool and the mounts offer it.
struct PageSizeOffer {
  uint64_t page_size = 0;
  uint64_t free_pages = 0;  // that a new mapping can still get where it will be placed
  bool mounted = false;     // a hugetlbfs mount of this size is there
};

// The page size for a private mapping of `bytes`: `wanted` when it is non-zero and offered with
// enough free pages; for auto (0), the largest offered size that has enough free pages and
// rounds `bytes` up by at most 1/64 of it, where the smallest hugepage size is never held to that
// bound. nullopt when none fits; `why` then says why, naming the sizes and page counts.
std::optional<uint64_t> choose_page_size(uint64_t bytes, uint64_t wanted, const std::vector<PageSizeOffer>& offers,
                                         std::string* why);

}  // namespace hugepin
