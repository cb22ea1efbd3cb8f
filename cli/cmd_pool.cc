// hugepin pool show|set|clear|mount|apply
#include <grp.h>
#include <pwd.h>

#include <algorithm>
#include <iostream>

#include "base/log.h"
#include "base/options.h"
#include "base/size.h"
#include "base/table.h"
#include "cli/command.h"
#include "daemon/config.h"
#include "daemon/pool_config.h"
#include "hugemem/mounts.h"
#include "hugemem/pool.h"

namespace hugepin::cli {
namespace {

// A node or page size this machine does not have is bad usage (exit 2), found before anything
// is written.
void check_pool_target(const PoolState& state, std::optional<int> node, uint64_t page_size) {
  if (node && std::find(state.nodes.begin(), state.nodes.end(), *node) == state.nodes.end()) {
    throw UsageError(cat("--node ", *node, ": no such NUMA node here (nodes: ", state.nodes.size(), ")"));
  }
  if (page_size != 0 && std::find(state.page_sizes.begin(), state.page_sizes.end(), page_size) == state.page_sizes.end()) {
    std::string supported;
    for (uint64_t size : state.page_sizes) supported += (supported.empty() ? "" : ", ") + page_size_name(size);
    throw UsageError(cat("--pagesize ", page_size_name(page_size), ": not a hugepage size of this kernel (",
                         supported.empty() ? std::string("none") : supported, ")"));
  }
}

Json pool_json(const PoolState& state) {
  Json json;
  json["default_page_size"] = state.default_page_size;
  json["page_sizes"] = state.page_sizes;
  json["nodes"] = state.nodes;
  Json per_node = Json::array();
  for (const PoolCounts& row : state.per_node) {
    per_node.push_back({{"node", row.node}, {"page_size", row.page_size}, {"total", row.total},
                        {"free", row.free}, {"surplus", row.surplus}});
  }
  json["per_node"] = per_node;
  Json system = Json::array();
  for (const PoolCounts& row : state.system) {
    system.push_back({{"page_size", row.page_size}, {"total", row.total}, {"free", row.free},
                      {"surplus", row.surplus}, {"reserved", row.reserved}});
  }
  json["system"] = system;
  Json mounts = Json::array();
  for (const HugetlbfsMount& mount : state.mounts) {
    mounts.push_back({{"dir", mount.dir}, {"page_size", mount.page_size}, {"options", mount.options}});
  }
  json["mounts"] = mounts;
  json["thp"] = {{"enabled", state.thp.enabled}, {"defrag", state.thp.defrag},
                 {"shmem_enabled", state.thp.shmem_enabled}};
  return json;
}

void print_pool(const PoolState& state) {
  Table table({"NODE", "PAGE", "TOTAL", "FREE", "SURPLUS", "RESERVED", "FREE BYTES"});
  for (const PoolCounts& row : state.per_node) {
    table.add_row({std::to_string(row.node), page_size_name(row.page_size), std::to_string(row.total),
                   std::to_string(row.free), std::to_string(row.surplus), "-",
                   format_bytes(row.free * row.page_size)});
  }
  for (const PoolCounts& row : state.system) {
    table.add_row({"all", page_size_name(row.page_size), std::to_string(row.total), std::to_string(row.free),
                   std::to_string(row.surplus), std::to_string(row.reserved),
                   format_bytes(row.free * row.page_size)});
  }
  std::cout << table.render();
  std::cout << "\nhugetlbfs mounts:";
  if (state.mounts.empty()) std::cout << " none (hugepin pool mount --pagesize 2M)";
  std::cout << "\n";
  for (const HugetlbfsMount& mount : state.mounts) {
    std::cout << "  " << mount.dir << "  " << page_size_name(mount.page_size) << "  (" << mount.options << ")\n";
  }
  std::cout << "\ntransparent hugepages: enabled=" << (state.thp.enabled.empty() ? "?" : state.thp.enabled)
            << " defrag=" << (state.thp.defrag.empty() ? "?" : state.thp.defrag)
            << " shmem_enabled=" << (state.thp.shmem_enabled.empty() ? "?" : state.thp.shmem_enabled) << "\n";
}

void print_changes(const std::vector<PoolChange>& changes) {
  Table table({"NODE", "PAGE", "BEFORE", "ASKED", "NOW", "NOW BYTES"});
  for (const PoolChange& change : changes) {
    table.add_row({std::to_string(change.node), page_size_name(change.page_size), std::to_string(change.before),
                   std::to_string(change.asked), std::to_string(change.after),
                   format_bytes(change.after * change.page_size)});
  }
  std::cout << table.render();
}

uid_t user_id(const std::string& name) {
  if (passwd* entry = getpwnam(name.c_str())) return entry->pw_uid;
  throw UsageError(cat("unknown user '", name, "'"));
}

gid_t group_id(const std::string& name) {
  if (group* entry = getgrnam(name.c_str())) return entry->gr_gid;
  throw UsageError(cat("unknown group '", name, "'"));
}

struct ShowArgs {
  bool json = false;
};

int pool_show(Os& os, const ShowArgs& args) {
  PoolState state = read_pool(os);
  if (args.json) {
    print_json(pool_json(state));
  } else {
    print_pool(state);
  }
  return 0;
}

void add_pool_show(CLI::App& pool, Context& context) {
  auto args = std::make_shared<ShowArgs>();
  CLI::App* show = pool.add_subcommand("show", "Pages per NUMA node and page size, mounts, THP settings");
  show->add_flag("--json", args->json, "Print JSON (documented in docs/commands.md)");
  run_when_chosen(show, context, [&context, args] { return pool_show(context.os(), *args); });
}

struct SetArgs {
  std::string size;
  std::optional<int> node;
  std::string page_size = "2M";
};

int pool_set(Os& os, const SetArgs& args) {
  uint64_t page_size = page_size_value(args.page_size);
  if (page_size < 2 * kMiB) throw UsageError("--pagesize must be 2M or 1G for the hugepage pool");
  check_pool_target(read_pool(os), args.node, page_size);
  const uint64_t bytes = size_value(args.size);
  // A pool larger than the machine is a typo (18446744073709551615 once asked 4,398,046,511,104
  // pages of every node): refused before anything is written.
  const uint64_t memory = read_meminfo_bytes(os, "MemTotal");
  if (memory != 0 && bytes > memory) {
    throw UsageError(cat("SIZE ", args.size, " (", format_bytes(bytes), ") is more than this machine's memory (",
                         format_bytes(memory), " in /proc/meminfo)"));
  }
  std::vector<PoolChange> changes = set_pool(os, bytes, args.node, page_size);
  print_changes(changes);
  if (std::string shortfall = shortfall_message(changes); !shortfall.empty()) throw Error(shortfall);
  return 0;
}

void add_pool_set(CLI::App& pool, Context& context) {
  auto args = std::make_shared<SetArgs>();
  CLI::App* set = pool.add_subcommand("set", "Reserve SIZE of hugepages (per node, or split over all nodes)");
  set->add_option("SIZE", args->size, "Bytes to hold in the pool (4G, 512M, ...)")->required()->check(size_validator());
  set->add_option("--node", args->node, "NUMA node (default: split evenly over all nodes)")
      ->check(CLI::NonNegativeNumber);
  set->add_option("--pagesize", args->page_size, "Page size")->check(page_size_validator(false));
  run_when_chosen(set, context, [&context, args] { return pool_set(context.os(), *args); });
}

struct ClearArgs {
  std::optional<int> node;
  std::string page_size;
};

int pool_clear(Os& os, const ClearArgs& args) {
  PoolState state = read_pool(os);
  std::vector<uint64_t> sizes = state.page_sizes;
  if (!args.page_size.empty()) sizes = {page_size_value(args.page_size)};
  for (uint64_t page_size : sizes) check_pool_target(state, args.node, page_size);
  if (sizes.empty()) check_pool_target(state, args.node, 0);
  std::vector<PoolChange> all;
  for (uint64_t page_size : sizes) {
    std::vector<PoolChange> changes = set_pool(os, 0, args.node, page_size);
    all.insert(all.end(), changes.begin(), changes.end());
  }
  print_changes(all);
  for (const PoolChange& change : all) {
    if (change.after > 0) {
      std::cout << "node " << change.node << ": " << change.after << " " << page_size_name(change.page_size)
                << " pages are still in use (surplus until freed)\n";
    }
  }
  return 0;
}

void add_pool_clear(CLI::App& pool, Context& context) {
  auto args = std::make_shared<ClearArgs>();
  CLI::App* clear = pool.add_subcommand("clear", "Release pool pages (pages in use stay until freed)");
  clear->add_option("--node", args->node, "NUMA node (default: all)")->check(CLI::NonNegativeNumber);
  clear->add_option("--pagesize", args->page_size, "Page size (default: all)")->check(page_size_validator(false));
  run_when_chosen(clear, context, [&context, args] { return pool_clear(context.os(), *args); });
}

struct ApplyArgs {
  std::string config;
  std::string pool;
  bool allow_shortfall = false;
};

int pool_apply(Os& os, const ApplyArgs& args) {
  daemon::FlagValues flags;
  if (!args.config.empty()) flags[std::string(option_spec(Option::kConfig).variable)] = args.config;
  if (!args.pool.empty()) flags[std::string(option_spec(Option::kPool).variable)] = args.pool;
  if (args.allow_shortfall) flags[std::string(option_spec(Option::kPoolAllowShortfall).variable)] = "1";
  daemon::LoadedOptions loaded;
  try {
    loaded = daemon::load_options(os, flags, environment_source());
  } catch (const Error& error) {
    throw UsageError(error.what());
  }
  if (loaded.pool.empty()) {
    std::cout << "no pool entries (" << loaded.file.path << (loaded.file.found ? "" : " not found")
              << ", HUGEPIN_POOL unset): nothing to reserve\n";
    return 0;
  }
  std::vector<PoolChange> changes = daemon::apply_pool_entries(os, loaded.pool);
  print_changes(changes);
  if (std::string shortfall = shortfall_message(changes); !shortfall.empty()) {
    if (!loaded.options.flag(Option::kPoolAllowShortfall)) throw Error(shortfall);
    log::warn(cat(shortfall, " (allowed: HUGEPIN_POOL_ALLOW_SHORTFALL)"));
  }
  return 0;
}

void add_pool_apply(CLI::App& pool, Context& context) {
  auto args = std::make_shared<ApplyArgs>();
  CLI::App* apply = pool.add_subcommand(
      "apply", "Reserve the pages hugepind's configuration asks for ([pool] section; hugepin-pool.service at boot)");
  apply->add_option("--config", args->config, "Configuration file (default: HUGEPIN_CONFIG, else /etc/hugepin/hugepind.conf)");
  apply->add_option("--pool", args->pool, "Entries instead of the file's: SIZE.nodeN=PAGES or SIZE=PAGES, comma-separated");
  apply->add_flag("--allow-shortfall", args->allow_shortfall,
                  "Exit 0 even when the kernel gives fewer pages than asked (HUGEPIN_POOL_ALLOW_SHORTFALL)");
  run_when_chosen(apply, context, [&context, args] { return pool_apply(context.os(), *args); });
}

struct MountArgs {
  std::string page_size = "2M";
  std::string dir;
  std::string user;
  std::string group;
  std::string mode = "1770";
};

int pool_mount(Os& os, const MountArgs& args) {
  MountRequest request;
  request.page_size = page_size_value(args.page_size);
  if (request.page_size < 2 * kMiB) throw UsageError("--pagesize must be 2M or 1G for hugetlbfs");
  request.dir = args.dir.empty() ? default_mount_dir(request.page_size) : args.dir;
  if (!args.user.empty()) request.uid = user_id(args.user);
  if (!args.group.empty()) request.gid = group_id(args.group);
  char* end = nullptr;
  unsigned long mode = std::strtoul(args.mode.c_str(), &end, 8);
  if (args.mode.empty() || *end != '\0' || mode > 07777) {
    throw UsageError(cat("--mode '", args.mode, "' is not an octal mode"));
  }
  request.mode = static_cast<mode_t>(mode);
  bool mounted = mount_hugetlbfs(os, request);
  std::cout << request.dir << ": " << (mounted ? "mounted" : "already mounted") << " hugetlbfs with "
            << page_size_name(request.page_size) << " pages\n";
  return 0;
}

void add_pool_mount(CLI::App& pool, Context& context) {
  auto args = std::make_shared<MountArgs>();
  CLI::App* mount = pool.add_subcommand("mount", "Mount hugetlbfs for a page size");
  mount->add_option("--pagesize", args->page_size, "Page size")->check(page_size_validator(false));
  mount->add_option("--dir", args->dir, "Mount point (default: /dev/hugepages, /dev/hugepages1G for 1G)");
  mount->add_option("--user", args->user, "Owner of the mount's root");
  mount->add_option("--group", args->group, "Group of the mount's root");
  mount->add_option("--mode", args->mode, "Octal mode of the mount's root");
  run_when_chosen(mount, context, [&context, args] { return pool_mount(context.os(), *args); });
}

}  // namespace

void add_pool_commands(CLI::App& app, Context& context) {
  CLI::App* pool = app.add_subcommand("pool", "Show and configure the hugepage pool");
  pool->require_subcommand(1);
  add_pool_show(*pool, context);
  add_pool_set(*pool, context);
  add_pool_clear(*pool, context);
  add_pool_apply(*pool, context);
  add_pool_mount(*pool, context);
}

}  // namespace hugepin::cli
