#include "hugemem/backing.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "base/size.h"

namespace hugepin {
namespace {

constexpr uint64_t kSmallPage = 4 * kKiB;

uint64_t pages_for(uint64_t bytes, uint64_t page_size) {
  return bytes / page_size + (bytes % page_size != 0 ? 1 : 0);
}

std::string where(int node) { return node < 0 ? std::string("any node") : cat("node ", node); }

// The hugetlbfs mount for `page_size`: the configured dir when it has that size, else the one
// /proc/mounts lists.
std::optional<std::string> mount_for(const PoolState& pool, const ArenaOptions& options,
                                     uint64_t page_size) {
  if (!options.hugetlbfs_dir.empty()) {
    for (const HugetlbfsMount& mount : pool.mounts) {
      if (mount.dir == options.hugetlbfs_dir && mount.page_size == page_size) return mount.dir;
    }
    return std::nullopt;
  }
  if (auto mount = find_hugetlbfs_mount(pool.mounts, page_size)) return mount->dir;
  return std::nullopt;
}

}  // namespace

BackingChoice choose_backing(const PoolState& pool, const RegionRequest& request,
                             const ArenaOptions& options, PagesTaken& taken) {
  std::vector<uint64_t> candidates;
  if (options.page_size == 0) {
    // Best available: every size the pool holds pages of, largest first. Sizes with no pool at
    // all are not configured here, so skipping them is no fallback.
    for (auto it = pool.page_sizes.rbegin(); it != pool.page_sizes.rend(); ++it) {
      const PoolCounts* row = pool.find(-1, *it);
      if (row != nullptr && row->total > 0) candidates.push_back(*it);
    }
  } else if (options.page_size != kSmallPage) {
    if (std::find(pool.page_sizes.begin(), pool.page_sizes.end(), options.page_size) ==
        pool.page_sizes.end()) {
      throw Error(cat("page size ", page_size_name(options.page_size),
                      " is not a hugepage size this kernel supports"));
    }
    candidates.push_back(options.page_size);
  }

  std::string reasons;
  for (uint64_t page_size : candidates) {
    uint64_t need = pages_for(request.bytes, page_size);
    std::optional<std::string> mount = mount_for(pool, options, page_size);
    uint64_t have = pool.available(request.node, page_size);
    uint64_t used = taken[{request.node, page_size}];
    // Pages other regions took on any node also leave the system pool.
    uint64_t used_system = 0;
    for (const auto& [key, pages] : taken) {
      if (key.second == page_size) used_system += pages;
    }
    uint64_t system_left = pool.available(-1, page_size);
    system_left = system_left > used_system ? system_left - used_system : 0;
    uint64_t left = std::min(have > used ? have - used : 0, system_left);
    std::string reason;
    if (!mount) {
      reason = cat("no hugetlbfs mount for ", page_size_name(page_size), " pages (hugepin pool mount --pagesize ",
                   page_size_name(page_size), ")");
    } else if (left < need) {
      reason = cat(need, " ", page_size_name(page_size), " pages needed on ", where(request.node), ", ",
                   left, " free (", pool_set_hint(pool, request.node, page_size, need - left), ")");
    } else {
      taken[{request.node, page_size}] += need;
      BackingChoice choice{page_size, *mount, reasons};
      if (!reasons.empty()) choice.fallback = cat("rank ", request.rank, " uses ", page_size_name(page_size),
                                                   " pages: ", reasons);
      if (!choice.fallback.empty() && options.strict) throw Error(cat("strict: ", choice.fallback));
      return choice;
    }
    reasons += cat(reasons.empty() ? "" : "; ", reason);
  }

  BackingChoice choice{kSmallPage, options.shm_dir, ""};
  if (!reasons.empty()) {
    choice.fallback = cat("rank ", request.rank, " falls back to 4 KiB shared memory: ", reasons);
  } else if (options.page_size == 0) {
    uint64_t hint_size = pool.default_page_size != 0 ? pool.default_page_size : 2 * kMiB;
    choice.fallback = cat("rank ", request.rank, " falls back to 4 KiB shared memory: no hugepages are reserved (",
                          pool_set_hint(pool, request.node, hint_size, pages_for(request.bytes, hint_size)),
                          ")");
    choice.no_pool = true;
  }
  if (!choice.fallback.empty() && options.strict) throw Error(cat("strict: ", choice.fallback));
  return choice;
}

}  // namespace hugepin
