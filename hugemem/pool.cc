#include "hugemem/pool.h"

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "base/error.h"
#include "base/pool_set_command.h"
#include "base/size.h"

namespace hugepin {
namespace {

constexpr const char* kSystemDir = "/sys/kernel/mm/hugepages";
constexpr const char* kNodeDir = "/sys/devices/system/node";
constexpr const char* kThpDir = "/sys/kernel/mm/transparent_hugepage";

std::string size_dir_name(uint64_t page_size) { return cat("hugepages-", page_size / kKiB, "kB"); }

std::string node_size_dir(int node, uint64_t page_size) {
  return cat(kNodeDir, "/node", node, "/hugepages/", size_dir_name(page_size));
}

// "hugepages-2048kB" -> 2 MiB. Returns nullopt for any other entry.
std::optional<uint64_t> parse_size_dir_name(const std::string& name) {
  constexpr std::string_view kPrefix = "hugepages-";
  constexpr std::string_view kSuffix = "kB";
  if (name.size() <= kPrefix.size() + kSuffix.size() || name.rfind(kPrefix, 0) != 0 ||
      name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
    return std::nullopt;
  }
  uint64_t kib = 0;
  const char* first = name.data() + kPrefix.size();
  const char* last = name.data() + name.size() - kSuffix.size();
  auto [end, ec] = std::from_chars(first, last, kib);
  if (ec != std::errc() || end != last || kib == 0) return std::nullopt;
  return kib * kKiB;
}

// "always [madvise] never" -> "madvise".
std::string selected_value(Os& os, const std::string& path) {
  std::string text;
  if (os.read_file(path, &text) < 0) return "";
  size_t open = text.find('[');
  size_t close = text.find(']', open);
  if (open == std::string::npos || close == std::string::npos) return "";
  return text.substr(open + 1, close - open - 1);
}

std::vector<int> read_nodes(Os& os) {
  std::vector<std::string> entries;
  std::vector<int> nodes;
  if (os.list_dir(kNodeDir, &entries) < 0) return nodes;
  for (const std::string& entry : entries) {
    int id = 0;
    if (entry.rfind("node", 0) != 0) continue;
    auto [end, ec] = std::from_chars(entry.data() + 4, entry.data() + entry.size(), id);
    if (ec == std::errc() && end == entry.data() + entry.size()) nodes.push_back(id);
  }
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

void check_page_size(const PoolState& state, uint64_t page_size) {
  if (std::find(state.page_sizes.begin(), state.page_sizes.end(), page_size) != state.page_sizes.end()) {
    return;
  }
  std::string supported;
  for (uint64_t size : state.page_sizes) supported += (supported.empty() ? "" : ", ") + page_size_name(size);
  throw Error(cat("page size ", page_size_name(page_size), " is not supported by this kernel (supported: ",
                  supported.empty() ? "none" : supported, ")"));
}

}  // namespace

const PoolCounts* PoolState::find(int node, uint64_t page_size) const {
  const std::vector<PoolCounts>& rows = node < 0 ? system : per_node;
  for (const PoolCounts& row : rows) {
    if (row.node == node && row.page_size == page_size) return &row;
  }
  return nullptr;
}

uint64_t PoolState::available(int node, uint64_t page_size) const {
  const PoolCounts* system_row = find(-1, page_size);
  if (system_row == nullptr) return 0;
  uint64_t system_free = system_row->free > system_row->reserved ? system_row->free - system_row->reserved : 0;
  if (node < 0) return system_free;
  const PoolCounts* node_row = find(node, page_size);
  if (node_row == nullptr) return 0;
  // Reserved pages are counted system-wide only; a node can offer no more than the system.
  return std::min(node_row->free, system_free);
}

PoolState read_pool(Os& os) {
  PoolState state;
  state.default_page_size = read_default_page_size(os);
  std::vector<std::string> entries;
  if (os.list_dir(kSystemDir, &entries) == 0) {
    for (const std::string& entry : entries) {
      if (auto size = parse_size_dir_name(entry)) state.page_sizes.push_back(*size);
    }
  }
  std::sort(state.page_sizes.begin(), state.page_sizes.end());
  state.nodes = read_nodes(os);

  for (uint64_t page_size : state.page_sizes) {
    std::string dir = cat(kSystemDir, "/", size_dir_name(page_size));
    PoolCounts row;
    row.page_size = page_size;
    row.total = read_kernel_u64(os, dir + "/nr_hugepages");
    row.free = read_kernel_u64(os, dir + "/free_hugepages");
    row.surplus = read_kernel_u64(os, dir + "/surplus_hugepages");
    row.reserved = read_kernel_u64(os, dir + "/resv_hugepages");
    state.system.push_back(row);
  }
  for (int node : state.nodes) {
    for (uint64_t page_size : state.page_sizes) {
      std::string dir = node_size_dir(node, page_size);
      PoolCounts row;
      row.node = node;
      row.page_size = page_size;
      row.total = read_kernel_u64(os, dir + "/nr_hugepages");
      row.free = read_kernel_u64(os, dir + "/free_hugepages");
      row.surplus = read_kernel_u64(os, dir + "/surplus_hugepages");
      state.per_node.push_back(row);
    }
  }
  state.mounts = read_hugetlbfs_mounts(os, state.default_page_size);
  state.thp.enabled = selected_value(os, cat(kThpDir, "/enabled"));
  state.thp.defrag = selected_value(os, cat(kThpDir, "/defrag"));
  state.thp.shmem_enabled = selected_value(os, cat(kThpDir, "/shmem_enabled"));
  return state;
}

std::vector<PoolChange> set_pool(Os& os, uint64_t bytes, std::optional<int> node, uint64_t page_size) {
  PoolState state = read_pool(os);
  check_page_size(state, page_size);
  std::vector<int> targets;
  if (node) {
    if (std::find(state.nodes.begin(), state.nodes.end(), *node) == state.nodes.end()) {
      throw Error(cat("NUMA node ", *node, " does not exist (nodes: ", state.nodes.size(), ")"));
    }
    targets.push_back(*node);
  } else {
    targets = state.nodes;
  }
  if (targets.empty()) throw Error(cat("no NUMA nodes found in ", kNodeDir));

  uint64_t pages = bytes / page_size + (bytes % page_size != 0 ? 1 : 0);
  std::vector<PoolChange> changes;
  for (size_t i = 0; i < targets.size(); ++i) {
    // An even split, the remainder going to the first nodes.
    uint64_t share = pages / targets.size() + (i < pages % targets.size() ? 1 : 0);
    std::string file = node_size_dir(targets[i], page_size) + "/nr_hugepages";
    PoolChange change;
    change.node = targets[i];
    change.page_size = page_size;
    change.before = read_kernel_u64(os, file);
    change.asked = share;
    if (int rc = os.write_file(file, std::to_string(share)); rc < 0) {
      throw_errno(cat("cannot write ", share, " to ", file,
                      rc == -EACCES || rc == -EPERM ? " (changing the pool needs root)" : ""),
                  -rc);
    }
    change.after = read_kernel_u64(os, file);
    changes.push_back(change);
  }
  return changes;
}

std::string shortfall_message(const std::vector<PoolChange>& changes) {
  std::string message;
  bool gigantic = false;
  for (const PoolChange& change : changes) {
    if (!change.short_of_target()) continue;
    message += cat(message.empty() ? "" : "; ", "node ", change.node, ": asked for ", change.asked, " ",
                   page_size_name(change.page_size), " pages, got ", change.after, " (",
                   change.asked - change.after, " short)");
    gigantic = gigantic || change.page_size >= kGiB;
  }
  if (message.empty()) return message;
  message = "hugepage pool came up short: " + message;
  if (gigantic) {
    message += "; memory is too fragmented for 1 GiB pages at run time: reserve them at boot "
               "(kernel command line hugepagesz=1G hugepages=N, or hugepin-pool.service)";
  } else {
    message += "; free memory is short or fragmented: free memory or reserve at boot";
  }
  return message;
}

std::string pool_set_hint(const PoolState& state, int node, uint64_t page_size, uint64_t pages) {
  const PoolCounts* row = state.find(node, page_size);
  return pool_set_command(pages + (row != nullptr ? row->total : 0), node, page_size);
}

}  // namespace hugepin
