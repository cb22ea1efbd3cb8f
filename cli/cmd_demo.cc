// hugepin demo: the main job on an embedded default.
//
// Creates an arena (hugepages when the pool can serve it, 4 KiB shared memory with a warning
// otherwise), shows where its pages landed, has one process per rank write a stamped pattern
// into its own region, checks every byte from this process, and removes the arena.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <iostream>

#include "base/pattern.h"
#include "base/size.h"
#include "base/table.h"
#include "cli/arena_view.h"
#include "cli/command.h"
#include "hugemem/arena.h"

namespace hugepin::cli {
namespace {

struct DemoArgs {
  std::string size = "1G";
  uint32_t ranks = 4;
  std::string page_size = "auto";
  unsigned threads = 0;
  bool keep = false;
};

// The child process of one rank: maps its region by name and stamps it. Exits 0 on success.
[[noreturn]] void rank_writer(const std::string& arena, uint32_t rank) {
  try {
    MappedRegion region = open_region(real_os(), arena, rank, /*writable=*/true);
    fill_pattern(region.data(), region.size(), /*seed=*/rank + 1);
    _exit(0);
  } catch (const std::exception& error) {
    std::cerr << "hugepin: rank " << rank << ": " << error.what() << "\n";
    _exit(1);
  }
}

int run_demo(const DemoArgs& args) {
  std::string name = cat("demo-", getpid());
  ArenaOptions options;
  options.page_size = page_size_value(args.page_size);
  options.prefault_threads = args.threads;
  std::vector<RegionRequest> requests = split_evenly(size_value(args.size), args.ranks);

  std::cout << "creating arena '" << name << "': " << args.ranks << " regions, " << args.size << " in all" << std::endl;
  ArenaReport report = create_arena(real_os(), name, requests, options);
  struct Cleanup {
    std::string name;
    bool keep;
    ~Cleanup() {
      if (keep) return;
      try {
        destroy_arena(real_os(), name);
      } catch (const std::exception& error) {
        std::cerr << "hugepin: cleanup: " << error.what() << "\n";
      }
    }
  } cleanup{name, args.keep};
  std::cout << arena_report_table(report) << "\n";

  auto start = std::chrono::steady_clock::now();
  std::vector<pid_t> children;
  for (const RegionReport& region : report.regions) {
    pid_t child = fork();
    if (child < 0) throw_errno("fork", errno);
    if (child == 0) rank_writer(name, region.rank);
    children.push_back(child);
  }
  int failed = 0;
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  if (failed != 0) throw Error(cat(failed, " rank processes failed"));
  double write_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  uint64_t checked = 0;
  for (const RegionReport& region : report.regions) {
    MappedRegion mapping = open_region(real_os(), name, region.rank, /*writable=*/false);
    if (auto bad = find_pattern_mismatch(mapping.data(), mapping.size(), region.rank + 1)) {
      throw Error(cat("rank ", region.rank, ": byte ", *bad, " of ", mapping.path(),
                      " differs from what its process wrote"));
    }
    checked += mapping.size();
  }
  std::cout << "rank processes wrote " << format_bytes(checked) << " in " << fixed(write_seconds, 3)
            << " s; this process read every byte back: all correct\n";
  std::cout << (args.keep ? cat("kept arena '", name, "' (hugepin arena destroy ", name, ")\n")
                          : cat("removed arena '", name, "'\n"));
  return 0;
}

}  // namespace

void add_demo_command(CLI::App& app, Context& context) {
  auto args = std::make_shared<DemoArgs>();
  CLI::App* demo = app.add_subcommand("demo", "Create an arena, share it between rank processes, check, remove");
  demo->add_option("--size", args->size, "Total bytes over all ranks")->check(size_validator());
  demo->add_option("--ranks", args->ranks, "Rank processes")->check(CLI::Range(1, 256));
  demo->add_option("--pagesize", args->page_size, "Page size")->check(page_size_validator(true));
  demo->add_option("--threads", args->threads, "Prefault threads per node (default: the node's CPUs)");
  demo->add_flag("--keep", args->keep, "Keep the arena afterwards");
  demo->callback([&context, args] { context.action = [args] { return run_demo(*args); }; });
}

}  // namespace hugepin::cli
