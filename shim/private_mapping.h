// A private hugepage mapping for one large request, when no arena is named: its own hugetlbfs
// file, unlinked as soon as it is open (a process that dies leaves nothing behind), sized to the
// request rounded up to the page, bound to the GPU's NUMA node before first touch, prefaulted
// (MADV_POPULATE_WRITE: a page the pool cannot give is an error, never a SIGBUS), and checked
// for where its pages landed.
//
// Thread-safety: free functions; concurrent calls make independent mappings.
#pragma once

#include <cstdint>
#include <string>

#include "base/os.h"
#include "shim/shim_config.h"

namespace hugepin {

struct PrivateMapping {
  void* data = nullptr;
  uint64_t bytes = 0;      // the request rounded up to the page
  uint64_t page_size = 0;
  int node = -1;           // where most pages are; -1 when unknown
  bool all_on_node = false;  // every page is on `node`
};

// Maps `bytes` (> 0) for a GPU on `gpu_node` (-1: no binding). Throws Fallback, having released
// everything it took, when the pool or the mounts cannot serve the request, or a system call
// fails; with config.strict also when the pages would not all be on `gpu_node`.
PrivateMapping map_private(Os& os, uint64_t bytes, int gpu_node, const ShimConfig& config);

// Unmaps a mapping map_private made; its pages go back to the pool.
void unmap_private(Os& os, const PrivateMapping& mapping);

// The page size of the hugetlbfs mount at `dir`, or 0 when `dir` is not a hugetlbfs mount.
uint64_t hugetlbfs_page_size(Os& os, const std::string& dir);

}  // namespace hugepin
