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

}  // namespace

void add_arena_commands(CLI::App& app, Context& context) {
  CLI::App* arena = app.add_subcommand("arena", "Create, list and destroy arenas");
  arena->require_subcommand(1);

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
  auto create_args = std::make_shared<CreateArgs>();
  CLI::App* create = arena->add_subcommand("create", "Create an arena: one region file per rank, prefaulted");
  create->add_option("NAME", create_args->name, "Arena name: letters, digits, '.', '_', '-'")->required();
  CLI::Option* size = create->add_option("--size", create_args->size, "Total bytes, split evenly over the ranks")
      ->check(size_validator());
  CLI::Option* ranks = create->add_option("--ranks", create_args->ranks, "Number of rank regions")->check(CLI::Range(1, 65536));
  CLI::Option* chunk = create->add_option("--chunk", create_args->chunk, "Chunk size: each region holds as many whole chunks as fit")
      ->check(size_validator());
  CLI::Option* page_size = create->add_option("--pagesize", create_args->page_size, "Page size (auto: 1G, then 2M, then 4K shared memory)")
      ->check(page_size_validator(true));
  CLI::Option* node = create->add_option("--node", create_args->node, "Bind every region to this NUMA node")->check(CLI::NonNegativeNumber);
  size->needs(ranks);
  ranks->needs(size);
  create->add_option("--plan", create_args->plan, "Plan input (as hugepin plan --input): one region per rank, as planned")
      ->check(CLI::ExistingFile)
      ->excludes(size, ranks, chunk, page_size, node);
  create->add_flag("--strict", create_args->strict, "Fail instead of falling back to a smaller page or another node");
  create->add_option("--threads", create_args->threads, "Prefault threads per node (default: the node's CPUs, at most 16)")
      ->check(CLI::Range(1, 1024));
  create->add_option("--dir", create_args->dir, "hugetlbfs mount to use (default: found in /proc/mounts)");
  create->add_flag("--json", create_args->json, "Print JSON (documented in README)");
  create->callback([&context, create_args] {
    if (create_args->plan.empty() && create_args->size.empty()) throw CLI::RequiredError("--plan or --size with --ranks");
    context.action = [&context, create_args] {
      check_name_usage(create_args->name);
      ArenaOptions options;
      options.page_size = page_size_value(create_args->page_size);
      options.strict = create_args->strict;
      options.prefault_threads = create_args->threads;
      options.hugetlbfs_dir = create_args->dir;
      ArenaLayout layout;
      if (!create_args->plan.empty()) {
        PlannedArena planned = planned_arena(plan_from_file(context.os(), create_args->plan));
        layout = std::move(planned.layout);
        options.page_size = planned.page_size;
      } else {
        try {
          layout = layout_for_size(size_value(create_args->size), create_args->ranks, size_value(create_args->chunk),
                                   create_args->node.value_or(-1));
        } catch (const Error& error) {  // --size, --ranks and --chunk that do not fit together
          throw UsageError(error.what());
        }
      }
      ArenaCreated created = create_arena_with_control(context.os(), create_args->name, layout, options);
      if (create_args->json) {
        Json json = arena_report_json(created.data);
        json["control"] = arena_control_json(created, layout);
        print_json(json);
      } else {
        std::cout << arena_report_table(created.data) << arena_control_line(created, layout);
      }
      return 0;
    };
  });

  struct ListArgs {
    bool json = false;
    bool stale = false;
    std::string shm_dir;
  };
  auto list_args = std::make_shared<ListArgs>();
  CLI::App* list = arena->add_subcommand("list", "List arenas and their region files");
  list->add_flag("--json", list_args->json, "Print JSON (documented in README)");
  list->add_flag("--stale", list_args->stale,
                 "List only stale files: arena data without a control segment, a segment without data, or an arena "
                 "whose processes died holding it");
  list->add_option("--shm-dir", list_args->shm_dir, "Where 4 KiB regions are (default: HUGEPIN_SHM_DIR, else /dev/shm)")
      ->check(CLI::ExistingDirectory);
  list->callback([&context, list_args] {
    context.action = [&context, list_args] {
      ArenaOptions where;
      if (!list_args->shm_dir.empty()) {
        where.shm_dir = list_args->shm_dir;
      } else if (const char* dir = std::getenv("HUGEPIN_SHM_DIR"); dir != nullptr && *dir != '\0') {
        where.shm_dir = dir;
      }
      if (list_args->stale) {
        std::vector<StaleArena> stale = find_stale_arenas(context.os(), where);
        for (StaleArena& orphan : find_orphaned_arenas(context.os(), where)) stale.push_back(std::move(orphan));
        if (list_args->json) {
          print_json(stale_listing_json(stale));
        } else if (stale.empty()) {
          std::cout << "no stale files\n";
        } else {
          std::cout << stale_listing_table(stale);
        }
        return 0;
      }
      // What someone planted where an arena's files would be is named, never followed or opened.
      std::vector<std::string> refused;
      std::vector<ArenaEntry> listings = list_arenas_with_control(context.os(), where, &refused);
      for (const std::string& line : refused) log::warn(line);
      if (list_args->json) {
        Json json = arena_listing_json(listings);
        json["refused"] = refused;
        print_json(json);
      } else if (listings.empty()) {
        std::cout << "no arenas\n";
      } else {
        std::cout << arena_listing_table(listings);
      }
      return 0;
    };
  });

  auto destroy_name = std::make_shared<std::string>();
  CLI::App* destroy = arena->add_subcommand("destroy", "Remove an arena, its control segment and all its files");
  destroy->add_option("NAME", *destroy_name, "Arena name")->required();
  destroy->callback([&context, destroy_name] {
    context.action = [&context, destroy_name] {
      check_name_usage(*destroy_name);
      ArenaDestroyed destroyed = destroy_arena_with_control(context.os(), *destroy_name);
      std::cout << "destroyed arena '" << *destroy_name << "' (" << destroyed.region_files << " region files"
                << (destroyed.control_removed ? ", control segment" : "") << ")\n";
      return 0;
    };
  });
}

}  // namespace hugepin::cli
