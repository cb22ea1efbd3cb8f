// PCI addresses as users and the kernel write them. Pure: the planner normalizes the GPUs of its
// input with it, hugemem/topology.h the devices it looks up in sysfs.
#pragma once

#include <string>
#include <string_view>

namespace hugepin {

// "0000:17:00.0" from "17:00.0" or "0000:17:00.0" (any case, surrounding white space ignored).
// Throws Error naming the address when it is not a PCI address.
std::string normalize_pci_address(std::string_view address);

}  // namespace hugepin
