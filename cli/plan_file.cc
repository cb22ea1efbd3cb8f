#include "cli/plan_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/error.h"
#include "hugemem/pool.h"
#include "hugemem/topology.h"

namespace hugepin::cli {
namespace {

// A plan input is a few kilobytes of JSON; anything past this is not one.
constexpr uint64_t kMaxPlanInputBytes = 16 << 20;

std::string read_text_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw_errno(cat("cannot open plan input ", path), errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(cat("plan input ", path, " is not a regular file"));
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxPlanInputBytes) {
    ::close(fd);
    throw Error(cat("plan input ", path, " is ", st.st_size, " bytes: a plan input is at most 16 MiB of JSON"));
  }
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
    if (text.size() > kMaxPlanInputBytes) {  // it grew while being read
      ::close(fd);
      throw Error(cat("plan input ", path, " is more than 16 MiB: not a plan input"));
    }
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
