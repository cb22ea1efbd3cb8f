#include "planner/host_info.h"

#include <algorithm>

namespace hugepin::planner {

const PoolPages* HostPool::find(int node, uint64_t page_size) const {
  for (const PoolPages& row : pages) {
    if (row.node == node && row.page_size == page_size) return &row;
  }
  return nullptr;
}

uint64_t HostPool::available(int node, uint64_t page_size) const {
  const PoolPages* row = find(node, page_size);
  return row != nullptr ? row->available : 0;
}

bool HostPool::supports(uint64_t page_size) const {
  return std::find(page_sizes.begin(), page_sizes.end(), page_size) != page_sizes.end();
}

bool HostPool::mounted(uint64_t page_size) const {
  return std::find(mounted_page_sizes.begin(), mounted_page_sizes.end(), page_size) != mounted_page_sizes.end();
}

}  // namespace hugepin::planner
