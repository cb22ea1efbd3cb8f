#include "planner/capacity_plan.h"

#include <algorithm>
#include <set>
#include <utility>

#include "base/arena_limits.h"
#include "base/error.h"
#include "base/pool_set_command.h"
#include "base/size.h"
#include "planner/checked_math.h"

namespace hugepin::planner {
namespace {

constexpr uint64_t kSmallPage = 4 * kKiB;
constexpr uint64_t kFallbackPage = 2 * kMiB;

std::string rank_path(size_t index) { return cat("ranks[", index, "]"); }

std::string rank_name(const RankPlan& rank) {
  return cat("rank ", rank.rank, " (tp_rank ", rank.tp_rank, ", pp_rank ", rank.pp_rank, ")");
}

void check_scalars(const PlanInput& input) {
  if (input.tp == 0) throw Error("tp = 0: must be at least 1");
  if (input.pp == 0) throw Error("pp = 0: must be at least 1");
  if (input.dp != 1) throw Error(cat("dp = ", input.dp, ": only dp = 1 is supported (one engine per plan)"));
  if (input.pcp != 1) throw Error(cat("pcp = ", input.pcp, ": only pcp = 1 is supported"));
  if (input.dcp != 1) throw Error(cat("dcp = ", input.dcp, ": only dcp = 1 is supported"));
  if (input.blocks_per_chunk == 0) throw Error("blocks_per_chunk = 0: must be at least 1");
  if (input.page_size != 0 && input.page_size != kSmallPage && input.page_size != 2 * kMiB &&
      input.page_size != kGiB) {
    throw Error(cat("page_size = ", page_size_name(input.page_size), ": must be 4K, 2M or 1G"));
  }
}

// Up to four (tp_rank, pp_rank) pairs that no rank names, as "(t, p), ...".
std::string missing_pairs(const PlanInput& input, const std::set<uint64_t>& present) {
  std::string text;
  size_t found = 0;
  uint64_t total = uint64_t{input.tp} * input.pp;
  // Only present.size() flat ranks are taken, so this many indices hold four missing ones.
  uint64_t scan = std::min<uint64_t>(total, present.size() + 4);
  for (uint64_t flat = 0; flat < scan && found < 4; ++flat) {
    if (present.count(flat) != 0) continue;
    text += cat(found == 0 ? "" : ", ", "(", flat % input.tp, ", ", flat / input.tp, ")");
    ++found;
  }
  if (total - present.size() > found) text += ", ...";
  return text;
}

// Every (tp_rank, pp_rank) once, in range, and tp * pp of them.
void check_rank_grid(const PlanInput& input) {
  const uint64_t expected = uint64_t{input.tp} * input.pp;
  if (expected > kMaxArenaRanks) {
    throw Error(cat("tp * pp = ", input.tp, " * ", input.pp, " = ", expected, ": more ranks than the ", kMaxArenaRanks,
                    " an arena may have"));
  }
  std::map<uint64_t, size_t> seen;  // flat rank -> index in ranks
  for (size_t i = 0; i < input.ranks.size(); ++i) {
    const RankInput& rank = input.ranks[i];
    if (rank.tp_rank >= input.tp) {
      throw Error(cat(rank_path(i), ".tp_rank = ", rank.tp_rank, ": must be below tp = ", input.tp));
    }
    if (rank.pp_rank >= input.pp) {
      throw Error(cat(rank_path(i), ".pp_rank = ", rank.pp_rank, ": must be below pp = ", input.pp));
    }
    uint64_t flat = uint64_t{rank.pp_rank} * input.tp + rank.tp_rank;
    auto [it, inserted] = seen.emplace(flat, i);
    if (!inserted) {
      throw Error(cat(rank_path(i), " = (tp_rank ", rank.tp_rank, ", pp_rank ", rank.pp_rank, "): duplicate of ",
                      rank_path(it->second)));
    }
  }
  if (input.ranks.size() != expected) {
    std::set<uint64_t> present;
    for (const auto& [flat, index] : seen) present.insert(flat);
    std::string missing = missing_pairs(input, present);
    throw Error(cat("ranks = ", input.ranks.size(), " ranks: tp * pp = ", input.tp, " * ", input.pp, " = ", expected,
                    " expected", missing.empty() ? "" : cat("; missing (tp_rank, pp_rank): ", missing)));
  }
}

// The rank's payload per block, from its tensors or as given.
uint64_t rank_payload(const RankInput& rank, size_t index, RankLayout* layout) {
  std::string path = rank_path(index);
  if (rank.num_blocks == 0) throw Error(cat(path, ".num_blocks = 0: a KV cache holds at least one block"));
  if (rank.bytes_per_block) {
    if (!rank.tensors.empty()) {
      throw Error(cat(path, ".bytes_per_block = ", *rank.bytes_per_block, ": give tensors or bytes_per_block, not both"));
    }
    if (*rank.bytes_per_block == 0) throw Error(cat(path, ".bytes_per_block = 0: zero payload"));
    return *rank.bytes_per_block;
  }
  if (rank.tensors.empty()) throw Error(cat(path, ": a rank without KV tensors (give tensors or bytes_per_block)"));
  for (size_t t = 0; t < rank.tensors.size(); ++t) {
    if (rank.tensors[t].group >= kMaxGroups) {
      throw Error(cat(path, ".tensors[", t, "].group = ", rank.tensors[t].group, ": must be below ", kMaxGroups));
    }
  }
  *layout = rank_layout(rank.tensors, rank.num_blocks, path);
  if (layout->bytes_per_block == 0) throw Error(cat(path, ".tensors: zero payload"));
  return layout->bytes_per_block;
}

int rank_node(const RankInput& rank, size_t index, const HostInfo& host) {
  if (rank.gpu_pci.empty()) return -1;
  auto it = host.gpu_nodes.find(rank.gpu_pci);
  if (it == host.gpu_nodes.end()) {
    throw Error(cat(rank_path(index), ".gpu_pci = \"", rank.gpu_pci, "\": no such PCI device on this host"));
  }
  return it->second;
}

std::vector<GroupPayload> group_payloads(const RankLayout& layout, const std::vector<uint32_t>& groups) {
  std::vector<GroupPayload> payloads;
  for (uint32_t group : groups) payloads.push_back({group, 0});
  for (const StorageLayout& storage : layout.storages) {
    auto it = std::lower_bound(groups.begin(), groups.end(), storage.group);
    // Cannot overflow: the rank's total of the same terms was checked.
    payloads[static_cast<size_t>(it - groups.begin())].bytes_per_block += storage.bytes_per_block;
  }
  return payloads;
}

// Regions, rounding and pages of every rank, and their totals, on `page_size`.
void size_regions(CapacityPlan& plan, uint64_t page_size) {
  plan.page_size = page_size;
  plan.region_bytes = 0;
  plan.rounding_bytes = 0;
  for (RankPlan& rank : plan.ranks) {
    std::optional<uint64_t> region = round_up(rank.payload_bytes, page_size);
    if (!region) {
      throw Error(cat("cpu_bytes = ", plan.cpu_bytes, ": the region of ", rank_name(rank), ", ", rank.payload_bytes,
                      " bytes, overflows 64 bits when rounded up to ", page_size_name(page_size), " pages"));
    }
    rank.region_bytes = *region;
    rank.rounding_bytes = *region - rank.payload_bytes;
    rank.pages = *region / page_size;
    std::string what = cat("cpu_bytes = ", plan.cpu_bytes, ": total region bytes");
    plan.region_bytes = checked_add(plan.region_bytes, rank.region_bytes, what);
    plan.rounding_bytes = checked_add(plan.rounding_bytes, rank.rounding_bytes, what);
  }
}

// The `hugepin pool set` line that gives `pages` more pages of `page_size` on `node` than `pool` holds.
std::string pool_set_hint(const HostPool& pool, int node, uint64_t page_size, uint64_t pages) {
  const PoolPages* row = pool.find(node, page_size);
  return pool_set_command(pages + (row != nullptr ? row->total : 0), node, page_size);
}

// The pages each node needs on plan.page_size, what the pool has, and whether it serves them;
// sets plan.pool, plan.pool_can_serve, and notes for what per-node rows do not show.
void assess_pool(CapacityPlan& plan, const HostPool& pool) {
  std::map<int, uint64_t> needed;
  uint64_t total = 0;
  for (const RankPlan& rank : plan.ranks) {
    needed[rank.numa_node] = checked_add(needed[rank.numa_node], rank.pages, "pages needed on a node");
    total = checked_add(total, rank.pages, "pages needed");
  }
  const uint64_t page_size = plan.page_size;
  plan.pool.clear();
  plan.notes.clear();
  if (page_size == kSmallPage) {
    for (const auto& [node, pages] : needed) plan.pool.push_back({node, page_size, pages, std::nullopt, true, ""});
    plan.pool_can_serve = true;
    plan.notes.push_back("4K pages: the regions are 4 KiB shared memory, no hugepages (slower to pin and copy)");
    return;
  }
  bool all_served = true;
  bool supported = pool.supports(page_size);
  for (const auto& [node, pages] : needed) {
    uint64_t available = pool.available(node, page_size);
    bool served = available >= pages;
    // No `pool set` line can give pages of a size the kernel lacks: the note says so instead.
    std::string fix = served || !supported ? "" : pool_set_hint(pool, node, page_size, pages - available);
    plan.pool.push_back({node, page_size, pages, available, served, fix});
    all_served = all_served && served;
  }
  std::string size = page_size_name(page_size);
  uint64_t system_available = pool.available(-1, page_size);
  bool system_served = system_available >= total;
  bool mounted = pool.mounted(page_size);
  if (!supported) {
    plan.notes.push_back(cat("this kernel has no ", size, " hugepages"));
  } else if (all_served && !system_served) {
    plan.notes.push_back(cat(total, " ", size, " pages needed in all, ", system_available, " free system-wide: ",
                             pool_set_hint(pool, -1, page_size, total - system_available)));
  }
  if (!mounted) plan.notes.push_back(cat("no hugetlbfs mount for ", size, " pages: hugepin pool mount --pagesize ", size));
  plan.pool_can_serve = all_served && system_served && mounted && supported;
}

void choose_page_size(CapacityPlan& plan, uint64_t requested, const HostPool& pool) {
  if (requested != 0) {
    plan.page_size_choice = PageSizeChoice::kRequested;
    size_regions(plan, requested);
    assess_pool(plan, pool);
    return;
  }
  for (auto it = pool.page_sizes.rbegin(); it != pool.page_sizes.rend(); ++it) {
    if (*it != 2 * kMiB && *it != kGiB) continue;
    size_regions(plan, *it);
    assess_pool(plan, pool);
    if (plan.pool_can_serve) {
      plan.page_size_choice = PageSizeChoice::kBestAvailable;
      return;
    }
  }
  plan.page_size_choice = PageSizeChoice::kFallback;
  size_regions(plan, kFallbackPage);
  assess_pool(plan, pool);
  plan.notes.insert(plan.notes.begin(),
                    "no hugepage size can hold this plan now: planned on 2M pages; reserve them (the FIX lines), "
                    "or arena create falls back to 4 KiB shared memory");
}

}  // namespace

const char* page_size_choice_name(PageSizeChoice choice) {
  switch (choice) {
    case PageSizeChoice::kRequested: return "requested";
    case PageSizeChoice::kBestAvailable: return "best_available";
    case PageSizeChoice::kFallback: return "fallback";
  }
  return "requested";
}

CapacityPlan make_plan(const PlanInput& input, const HostInfo& host) {
  check_scalars(input);
  check_rank_grid(input);

  CapacityPlan plan;
  plan.tp = input.tp;
  plan.pp = input.pp;
  plan.blocks_per_chunk = input.blocks_per_chunk;
  plan.cpu_bytes = input.cpu_bytes;
  std::set<uint32_t> groups;
  for (size_t i = 0; i < input.ranks.size(); ++i) {
    const RankInput& rank = input.ranks[i];
    RankPlan planned;
    planned.rank = rank.pp_rank * input.tp + rank.tp_rank;  // < ranks.size(): fits
    planned.tp_rank = rank.tp_rank;
    planned.pp_rank = rank.pp_rank;
    planned.gpu_pci = rank.gpu_pci;
    planned.num_blocks = rank.num_blocks;
    planned.payload_bytes_per_block = rank_payload(rank, i, &planned.layout);
    planned.numa_node = rank_node(rank, i, host);
    for (const TensorDescriptor& tensor : rank.tensors) groups.insert(tensor.group);
    plan.payload_bytes_per_block =
        checked_add(plan.payload_bytes_per_block, planned.payload_bytes_per_block, "sum of rank payloads per block");
    plan.ranks.push_back(std::move(planned));
  }
  plan.groups.assign(groups.begin(), groups.end());
  std::sort(plan.ranks.begin(), plan.ranks.end(), [](const RankPlan& a, const RankPlan& b) { return a.rank < b.rank; });
  for (RankPlan& rank : plan.ranks) {
    if (!rank.layout.storages.empty()) rank.groups = group_payloads(rank.layout, plan.groups);
  }

  plan.chunk_bytes = checked_mul(plan.blocks_per_chunk, plan.payload_bytes_per_block,
                                 "blocks_per_chunk * sum of rank payloads per block");
  plan.chunk_count = plan.cpu_bytes / plan.chunk_bytes;
  if (plan.chunk_count == 0) {
    throw Error(cat("cpu_bytes = ", plan.cpu_bytes, ": less than one chunk; the smallest plan needs ", plan.chunk_bytes,
                    " bytes (blocks_per_chunk ", plan.blocks_per_chunk, " * ", plan.payload_bytes_per_block,
                    " payload bytes per block over all ranks)"));
  }
  plan.payload_bytes = checked_mul(plan.chunk_count, plan.chunk_bytes, "payload bytes");
  for (RankPlan& rank : plan.ranks) {
    rank.payload_bytes = checked_mul(checked_mul(plan.chunk_count, plan.blocks_per_chunk, "blocks per rank"),
                                     rank.payload_bytes_per_block, cat(rank_name(rank), " payload bytes"));
  }
  choose_page_size(plan, input.page_size, host.pool);
  return plan;
}

}  // namespace hugepin::planner
