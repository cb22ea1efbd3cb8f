#include "cli/plan_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "base/error.h"
#include "hugemem/pool.h"
#include "hugemem/topology.h"

namespace hugepin::cli {
namespace {

std::string read_text_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno(cat("cannot open plan input ", path), errno);
  std::string text;
  char buffer[65536];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int error = errno;
      ::close(fd);
      throw_errno(cat("cannot read plan input ", path), error);
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
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
  std::string text = read_text_file(path);
  try {
    planner::PlanInput input = planner::parse_plan_input(text);
    return planner::make_plan(input, read_host_info(os, input));
  } catch (const Error& error) {
    throw Error(cat(path, ": ", error.what()), error.errno_value());
  }
}

}  // namespace hugepin::cli
