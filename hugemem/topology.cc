#include "hugemem/topology.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "base/error.h"
#include "base/pci_address.h"

namespace hugepin {
namespace {

constexpr const char* kNodeDir = "/sys/devices/system/node";

bool parse_int(std::string_view text, int* out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  return text;
}

}  // namespace

const NumaNode* Topology::find(int node) const {
  for (const NumaNode& n : nodes) {
    if (n.id == node) return &n;
  }
  return nullptr;
}

std::vector<int> parse_id_list(std::string_view text) {
  std::vector<int> ids;
  std::string_view rest = trim(text);
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    size_t dash = item.find('-');
    int first = 0;
    int last = 0;
    bool ok = dash == std::string_view::npos
                  ? parse_int(item, &first) && (last = first, true)
                  : parse_int(item.substr(0, dash), &first) && parse_int(item.substr(dash + 1), &last);
    if (!ok || first < 0 || last < first || last - first > 1 << 20) {
      throw Error(cat("malformed id list '", trim(text), "': '", item, "' is not N or N-M"));
    }
    for (int id = first; id <= last; ++id) ids.push_back(id);
  }
  return ids;
}

Topology read_topology(Os& os) {
  Topology topology;
  std::vector<std::string> entries;
  if (os.list_dir(kNodeDir, &entries) < 0) {
    // No NUMA in this kernel: one node with every online CPU.
    NumaNode node;
    std::string online;
    if (os.read_file("/sys/devices/system/cpu/online", &online) == 0) node.cpus = parse_id_list(online);
    topology.nodes.push_back(std::move(node));
    return topology;
  }
  for (const std::string& entry : entries) {
    int id = 0;
    if (entry.rfind("node", 0) != 0 || !parse_int(std::string_view(entry).substr(4), &id)) continue;
    NumaNode node;
    node.id = id;
    std::string cpulist;
    if (os.read_file(cat(kNodeDir, "/", entry, "/cpulist"), &cpulist) == 0) {
      node.cpus = parse_id_list(cpulist);
    }
    topology.nodes.push_back(std::move(node));
  }
  if (topology.nodes.empty()) throw Error(cat("no NUMA nodes found in ", kNodeDir));
  std::sort(topology.nodes.begin(), topology.nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  return topology;
}

int pci_device_node(Os& os, std::string_view pci_address) {
  std::string address = normalize_pci_address(pci_address);
  std::string path = cat("/sys/bus/pci/devices/", address, "/numa_node");
  std::string contents;
  if (int rc = os.read_file(path, &contents); rc < 0) {
    throw Error(cat("PCI device ", address, " not found (", path, ": ", errno_text(-rc), ")"), -rc);
  }
  int node = 0;
  if (!parse_int(trim(contents), &node) || node < -1) {
    throw Error(cat("malformed kernel file ", path, ": '", trim(contents), "' is not a node number"));
  }
  return node;
}

}  // namespace hugepin
