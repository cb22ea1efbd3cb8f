// The hugepage pool: how many pages of each size the kernel holds, per NUMA node, and changing it.
//
// Everything is read and written through the Os seam (sysfs and procfs under its system root), so
// the same code runs against the real kernel and against recorded trees.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/os.h"
#include "hugemem/mounts.h"

namespace hugepin {

// One row of the pool: a page size on one node (node >= 0), or on the whole system (node == -1,
// the only level where the kernel counts reserved pages).
struct PoolCounts {
  int node = -1;
  uint64_t page_size = 0;
  uint64_t total = 0;    // nr_hugepages
  uint64_t free = 0;     // free_hugepages
  uint64_t surplus = 0;  // surplus_hugepages
  uint64_t reserved = 0; // resv_hugepages (system rows only): promised to mappings, not yet faulted
};

struct ThpSettings {
  // The selected value of each /sys/kernel/mm/transparent_hugepage knob ("" when absent).
  std::string enabled;
  std::string defrag;
  std::string shmem_enabled;
};

struct PoolState {
  uint64_t default_page_size = 0;      // Hugepagesize of /proc/meminfo
  std::vector<uint64_t> page_sizes;    // the sizes the kernel supports, ascending
  std::vector<int> nodes;              // NUMA nodes, ascending
  std::vector<PoolCounts> per_node;    // node-major, then page size
  std::vector<PoolCounts> system;      // one per page size
  std::vector<HugetlbfsMount> mounts;
  ThpSettings thp;

  const PoolCounts* find(int node, uint64_t page_size) const;
  // Pages of `page_size` that a new mapping can still get on `node` (-1: anywhere): free minus
  // the reserved ones when counting the system, free on that node otherwise.
  uint64_t available(int node, uint64_t page_size) const;
};

// Reads the whole pool. Throws Error naming the file when one is malformed.
PoolState read_pool(Os& os);

// One node's reservation change.
struct PoolChange {
  int node = 0;
  uint64_t page_size = 0;
  uint64_t before = 0;  // nr_hugepages before
  uint64_t asked = 0;
  uint64_t after = 0;   // as read back

  bool short_of_target() const { return after < asked; }
};

// Sets the number of pages of `page_size` to ceil(`bytes` / page_size): on `node`, or split
// evenly across every node when `node` is empty. Writes the per-node sysfs files and reads them
// back. Throws Error (changing nothing) for a page size or node the kernel does not have.
// A shortfall is not thrown: the caller reports it (see shortfall_message).
std::vector<PoolChange> set_pool(Os& os, uint64_t bytes, std::optional<int> node, uint64_t page_size);

// An error message for the changes that came up short, or "" when none did. Names the numbers,
// and for 1 GiB pages points at boot-time reservation.
std::string shortfall_message(const std::vector<PoolChange>& changes);

// The `hugepin pool set` command line that would give `pages` more free pages of `page_size` on
// `node` than `state` has now.
std::string pool_set_hint(const PoolState& state, int node, uint64_t page_size, uint64_t pages);

}  // namespace hugepin
