#include "cli/plan_file.h"

#include <cerrno>

#include "base/error.h"
#include "base/trusted_file.h"
#include "hugemem/pool.h"
#include "hugemem/topology.h"

namespace hugepin::cli {
namespace {

// A plan input is a few kilobytes of JSON; anything past this is not one.
constexpr uint64_t kMaxPlanInputBytes = 16 << 20;

// A plan names many things a root process then makes: opened as base/trusted_file.h says (a
// FIFO, a device or a link is refused, another user's file too), and read up to the limit.
std::string read_text_file(Os& os, const std::string& path) {
  return read_trusted_file(os, user_named(path), {FileType::kRegular, FileOwners::kTrusted, "plan input"},
                           kMaxPlanInputBytes);
}

}  // namespace

planner::HostInfo read_host_info(Os& os, const planner::PlanInput& input) {
  planner::HostInfo host;
  host.pool = read_pool(os);
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

planner::CapacityPlan plan_from_file(Os& os, const std::string& path) {
  std::string text = read_text_file(os, path);
  try {
    planner::PlanInput input = planner::parse_plan_input(text);
    return planner::make_plan(input, read_host_info(os, input));
  } catch (const Error& error) {
    throw Error(cat(path, ": ", error.what()), error.errno_value());
  }
}

}  // namespace hugepin::cli
