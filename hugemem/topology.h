// NUMA topology as the kernel describes it in sysfs, read through the Os seam.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/os.h"

namespace hugepin {

struct NumaNode {
  int id = 0;
  std::vector<int> cpus;  // from nodeN/cpulist; empty for memory-only nodes
};

struct Topology {
  // Nodes in id order. A kernel without NUMA support reports one node 0 holding every CPU.
  std::vector<NumaNode> nodes;

  const NumaNode* find(int node) const;
};

// Reads /sys/devices/system/node. Throws Error naming the file when it is malformed.
Topology read_topology(Os& os);

// Parses a kernel CPU or node list ("0-3,8,10-11"). Throws Error quoting `text` when malformed.
std::vector<int> parse_id_list(std::string_view text);

// The NUMA node of a PCI device (a GPU), from /sys/bus/pci/devices/<addr>/numa_node: -1 when
// the platform states no affinity. Throws Error naming the address when the device is absent.
int pci_device_node(Os& os, std::string_view pci_address);

}  // namespace hugepin
