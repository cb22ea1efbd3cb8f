// The host the planner's tests and its fuzz target plan on, by hand (the recorded sysfs trees, read
// the way hugepin reads a host, are session/host_plan_test.cc's).
#pragma once

#include "base/size.h"
#include "planner/host_info.h"

namespace hugepin::planner::test {

// Two nodes with GPUs at 0000:17:00.0 (node 0) and 0000:ca:00.0 (node 1), and 0000:00:02.0, a GPU
// the platform gives no node. 2M pages: 1024 held and 1000 free on node 0, 512 of 512 on node 1,
// 1512 free system-wide of which 10 are reserved, so 1502 available. 1G pages only on node 0 (4).
// Mounts for both sizes: every page-size path can be taken.
inline HostInfo two_node_host() {
  HostInfo host;
  host.gpu_nodes = {{"0000:17:00.0", 0}, {"0000:ca:00.0", 1}, {"0000:00:02.0", -1}};
  host.pool.page_sizes = {2 * kMiB, kGiB};
  host.pool.mounted_page_sizes = {2 * kMiB, kGiB};
  host.pool.pages = {{-1, 2 * kMiB, 1536, 1502}, {-1, kGiB, 4, 4},   {0, 2 * kMiB, 1024, 1000},
                     {0, kGiB, 4, 4},            {1, 2 * kMiB, 512, 512}, {1, kGiB, 0, 0}};
  return host;
}

}  // namespace hugepin::planner::test
