#include "session/host_plan.h"

#include <cerrno>

#include "base/error.h"
#include "hugemem/pool.h"
#include "hugemem/topology.h"

namespace hugepin {

planner::HostPool host_pool(const PoolState& pool) {
  planner::HostPool out;
  out.page_sizes = pool.page_sizes;
  for (const HugetlbfsMount& mount : pool.mounts) {
    if (!out.mounted(mount.page_size)) out.mounted_page_sizes.push_back(mount.page_size);
  }
  for (const std::vector<PoolCounts>* rows : {&pool.system, &pool.per_node}) {
    for (const PoolCounts& row : *rows) {
      out.pages.push_back({row.node, row.page_size, row.total, pool.available(row.node, row.page_size)});
    }
  }
  return out;
}

planner::HostInfo read_host_info(Os& os, const planner::PlanInput& input) {
  planner::HostInfo host;
  host.pool = host_pool(read_pool(os));
  for (size_t i = 0; i < input.ranks.size(); ++i) {
    const std::string& address = input.ranks[i].gpu_pci;
    if (address.empty() || host.gpu_nodes.count(address) != 0) continue;
    try {
      host.gpu_nodes[address] = pci_device_node(os, address);
    } catch (const Error& error) {
      // An absent device stays out of the map: make_plan names it, after checking the rest of the
      // input first, so the first error reported is the input's.
      if (error.errno_value() == ENOENT) continue;
      throw Error(cat("ranks[", i, "].gpu_pci = \"", address, "\": ", error.what()), error.errno_value());
    }
  }
  return host;
}

planner::CapacityPlan plan_on_host(Os& os, std::string_view json) {
  planner::PlanInput input;
  try {
    input = planner::parse_plan_input(json);
  } catch (const Error& error) {
    throw Error(error.what(), error.errno_value() != 0 ? error.errno_value() : EINVAL);
  }
  planner::HostInfo host = read_host_info(os, input);
  try {
    return planner::make_plan(input, host);
  } catch (const Error& error) {
    throw Error(error.what(), error.errno_value() != 0 ? error.errno_value() : EINVAL);
  }
}

}  // namespace hugepin
