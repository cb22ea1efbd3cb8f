// hugepin arena create|list|destroy
#include <cstdlib>
#include <iostream>

#include "base/log.h"
#include "base/size.h"
#include "cli/arena_view.h"
#include "cli/command.h"
#include "session/planned_arena.h"
#include "cli/plan_file.h"
#include "hugemem/arena.h"
#include "hugemem/naming.h"
#include "ipc/arena_control.h"
#include "ipc/arena_layout.h"
#include "ipc/stale_files.h"

namespace hugepin::cli {
namespace {

// An arena name that cannot be one is bad usage (exit 2), not a runtime failure.
void check_name_usage(const std::string& name) {
  try {
    check_arena_name(name);
  } catch (const Error& error) {
    throw UsageError(error.what());
  }
}

struct CreateArgs {
  std::string name;
  std::string size;
  uint32_t ranks = 0;
  std::string chunk = "2M";
  std::string page_size = "auto";
  std::optional<int> node;
  bool strict = false;
  unsigned threads = 0;
  std::string dir;
  bool json = false;
  std::string plan;
};

// The regions to make: as planned from --plan (the plan's page size then goes into `options`), or
// --size split evenly over --ranks.
ArenaLayout requested_layout(Os& os, const CreateArgs& args, ArenaOptions& options) {
  if (!args.plan.empty()) {
    PlannedArena planned = planned_arena(plan_from_file(os, args.plan));
    options.page_size = planned.page_size;
    return std::move(planned.layout);
  }
  try {
    return layout_for_size(size_value(args.size), args.ranks, size_value(args.chunk), args.node.value_or(-1));
  } catch (const Error& error) {  // --size, --ranks and --chunk that do not fit together
    throw UsageError(error.what());
  }
}

int arena_create(Os& os, const CreateArgs& args) {
  check_name_usage(args.name);
  ArenaOptions options;
  options.page_size = page_size_value(args.page_size);
  options.strict = args.strict;
  options.prefault_threads = args.threads;
  options.hugetlbfs_dir = args.dir;
  const ArenaLayout layout = requested_layout(os, args, options);
  ArenaCreated created = create_arena_with_control(os, args.name, layout, options);
  if (args.json) {
    Json json = arena_report_json(created.data);
    json["control"] = arena_control_json(created, layout);
    print_json(json);
  } else {
    std::cout << arena_report_table(created.data) << arena_control_line(created, layout);
  }
  return 0;
}

void add_arena_create(CLI::App& arena, Context& context) {
  auto args = std::make_shared<CreateArgs>();
  CLI::App* create = arena.add_subcommand("create", "Create an arena: one region file per rank, prefaulted");
  create->add_option("NAME", args->name, "Arena name: letters, digits, '.', '_', '-'")->required();
  CLI::Option* size = create->add_option("--size", args->size, "Total bytes, split evenly over the ranks")
      ->check(size_validator());
  CLI::Option* ranks = create->add_option("--ranks", args->ranks, "Number of rank regions")->check(CLI::Range(1, 65536));
  CLI::Option* chunk = create->add_option("--chunk", args->chunk, "Chunk size: each region holds as many whole chunks as fit")
      ->check(size_validator());
  CLI::Option* page_size = create->add_option("--pagesize", args->page_size, "Page size (auto: 1G, then 2M, then 4K shared memory)")
      ->check(page_size_validator(true));
  CLI::Option* node = create->add_option("--node", args->node, "Bind every region to this NUMA node")->check(CLI::NonNegativeNumber);
  size->needs(ranks);
  ranks->needs(size);
  create->add_option("--plan", args->plan, "Plan input (as hugepin plan --input): one region per rank, as planned")
      ->check(CLI::ExistingFile)
      ->excludes(size, ranks, chunk, page_size, node);
  create->add_flag("--strict", args->strict, "Fail instead of falling back to a smaller page or another node");
  create->add_option("--threads", args->threads, "Prefault threads per node (default: the node's CPUs, at most 16)")
      ->check(CLI::Range(1, 1024));
  create->add_option("--dir", args->dir, "hugetlbfs mount to use (default: found in /proc/mounts)");
  create->add_flag("--json", args->json, "Print JSON (documented in docs/commands.md)");
  create->callback([&context, args] {
    if (args->plan.empty() && args->size.empty()) throw CLI::RequiredError("--plan or --size with --ranks");
    context.action = [&context, args] { return arena_create(context.os(), *args); };
  });
}

struct ListArgs {
  bool json = false;
  bool stale = false;
  std::string shm_dir;
};

int list_stale(Os& os, const ArenaOptions& where, bool json) {
  std::vector<StaleArena> stale = find_stale_arenas(os, where);
  for (StaleArena& orphan : find_orphaned_arenas(os, where)) stale.push_back(std::move(orphan));
  if (json) {
    print_json(stale_listing_json(stale));
  } else if (stale.empty()) {
    std::cout << "no stale files\n";
  } else {
    std::cout << stale_listing_table(stale);
  }
  return 0;
}

int arena_list(Os& os, const ListArgs& args) {
  ArenaOptions where;
  if (!args.shm_dir.empty()) {
    where.shm_dir = args.shm_dir;
  } else if (const char* dir = std::getenv("HUGEPIN_SHM_DIR"); dir != nullptr && *dir != '\0') {
    where.shm_dir = dir;
  }
  if (args.stale) return list_stale(os, where, args.json);
  // What someone planted where an arena's files would be is named, never followed or opened.
  std::vector<std::string> refused;
  std::vector<ArenaEntry> listings = list_arenas_with_control(os, where, &refused);
  for (const std::string& line : refused) log::warn(line);
  if (args.json) {
    Json json = arena_listing_json(listings);
    json["refused"] = refused;
    print_json(json);
  } else if (listings.empty()) {
    std::cout << "no arenas\n";
  } else {
    std::cout << arena_listing_table(listings);
  }
  return 0;
}

void add_arena_list(CLI::App& arena, Context& context) {
  auto args = std::make_shared<ListArgs>();
  CLI::App* list = arena.add_subcommand("list", "List arenas and their region files");
  list->add_flag("--json", args->json, "Print JSON (documented in docs/commands.md)");
  list->add_flag("--stale", args->stale,
                 "List only stale files: arena data without a control segment, a segment without data, or an arena "
                 "whose processes died holding it");
  list->add_option("--shm-dir", args->shm_dir, "Where 4 KiB regions are (default: HUGEPIN_SHM_DIR, else /dev/shm)")
      ->check(CLI::ExistingDirectory);
  run_when_chosen(list, context, [&context, args] { return arena_list(context.os(), *args); });
}

int arena_destroy(Os& os, const std::string& name) {
  check_name_usage(name);
  ArenaDestroyed destroyed = destroy_arena_with_control(os, name);
  std::cout << "destroyed arena '" << name << "' (" << destroyed.region_files << " region files"
            << (destroyed.control_removed ? ", control segment" : "") << ")\n";
  return 0;
}

void add_arena_destroy(CLI::App& arena, Context& context) {
  auto name = std::make_shared<std::string>();
  CLI::App* destroy = arena.add_subcommand("destroy", "Remove an arena, its control segment and all its files");
  destroy->add_option("NAME", *name, "Arena name")->required();
  run_when_chosen(destroy, context, [&context, name] { return arena_destroy(context.os(), *name); });
}

}  // namespace

void add_arena_commands(CLI::App& app, Context& context) {
  CLI::App* arena = app.add_subcommand("arena", "Create, list and destroy arenas");
  arena->require_subcommand(1);
  add_arena_create(*arena, context);
  add_arena_list(*arena, context);
  add_arena_destroy(*arena, context);
}

}  // namespace hugepin::cli
