// What the planner knows of the host, as plain data. The planner reads nothing itself: the caller
// fills this, from sysfs (session/host_plan.h: read_host_info, host_pool) or, in tests, by hand
// (planner/test_host.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hugepin::planner {

// The pages of one size on one NUMA node, or on the whole system (node -1).
struct PoolPages {
  int node = -1;
  uint64_t page_size = 0;
  uint64_t total = 0;      // the pages the pool holds now (nr_hugepages)
  uint64_t available = 0;  // what a new mapping can still get: free pages less the reserved ones
                           // system-wide, and on a node no more than the system has

  bool operator==(const PoolPages&) const = default;
};

// The hugepage pool now.
struct HostPool {
  std::vector<uint64_t> page_sizes;          // the sizes the kernel supports, ascending
  std::vector<uint64_t> mounted_page_sizes;  // the sizes a hugetlbfs mount serves
  std::vector<PoolPages> pages;              // a row per node and size, and per size for node -1

  // The row of `page_size` on `node` (-1: the system); null when there is none.
  const PoolPages* find(int node, uint64_t page_size) const;
  // Pages of `page_size` a new mapping can get on `node` (-1: anywhere); 0 without a row.
  uint64_t available(int node, uint64_t page_size) const;
  bool supports(uint64_t page_size) const;
  bool mounted(uint64_t page_size) const;
};

struct HostInfo {
  std::map<std::string, int> gpu_nodes;  // normalized PCI address -> NUMA node (-1: none)
  HostPool pool;                          // the hugepage pool now
};

}  // namespace hugepin::planner
