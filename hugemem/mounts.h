// hugetlbfs mounts: finding them in /proc/mounts and creating them.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/os.h"

namespace hugepin {

struct HugetlbfsMount {
  std::string dir;
  uint64_t page_size = 0;  // from the pagesize= option, else the kernel's default hugepage size
  std::string options;     // as /proc/mounts shows them
};

// Every hugetlbfs mount, in /proc/mounts order. `default_page_size` is the kernel's default
// hugepage size (Hugepagesize in /proc/meminfo), used for mounts without a pagesize= option.
std::vector<HugetlbfsMount> read_hugetlbfs_mounts(Os& os, uint64_t default_page_size);

// The mount to use for `page_size`: /dev/hugepages* first, then the first in /proc/mounts.
std::optional<HugetlbfsMount> find_hugetlbfs_mount(const std::vector<HugetlbfsMount>& mounts,
                                                   uint64_t page_size);

// A size field of /proc/meminfo in bytes ("MemTotal", "Hugepagesize"; the file says kB); 0 when the
// file or the field is missing.
uint64_t read_meminfo_bytes(Os& os, std::string_view field);

// The kernel's default hugepage size, from Hugepagesize in /proc/meminfo (0 when absent).
uint64_t read_default_page_size(Os& os);

struct MountRequest {
  std::string dir;          // created (with parents) when missing
  uint64_t page_size = 0;
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  mode_t mode = 01770;
};

// The default mount point for a page size: /dev/hugepages for 2 MiB, /dev/hugepages1G for 1 GiB.
std::string default_mount_dir(uint64_t page_size);

// Mounts hugetlbfs as asked. Returns false when `dir` already holds a hugetlbfs mount of that
// page size (nothing done); throws Error naming the directory on failure.
bool mount_hugetlbfs(Os& os, const MountRequest& request);

}  // namespace hugepin
