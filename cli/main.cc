// hugepin: the command line. Thin: parse, call the library, print.
//
// Exit status: 0 success, 1 runtime failure, 2 bad usage. Errors are one line on stderr.
#include <iostream>

#include "base/log.h"
#include "cli/command.h"

int main(int argc, char** argv) {
  using namespace hugepin;
  CLI::App app{"hugepin: hugepage-backed, NUMA-aware pinned host memory for LLM inference"};
  app.name("hugepin");
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(HUGEPIN_VERSION));
  cli::Context context;
  bool verbose = false;
  bool quiet = false;
  app.add_flag("-v,--verbose", verbose, "Print progress and details");
  app.add_flag("-q,--quiet", quiet, "Print errors only");
  app.add_option("--sysroot", context.sysroot, "Read /sys and /proc under this directory (recorded trees)")
      ->check(CLI::ExistingDirectory);

  cli::add_pool_commands(app, context);
  cli::add_plan_command(app, context);
  cli::add_arena_commands(app, context);
  cli::add_snapshot_commands(app, context);
  cli::add_demo_command(app, context);
  cli::add_bench_commands(app, context);
  cli::add_inspect_commands(app, context);
  cli::add_shim_commands(app, context);
  cli::add_daemon_commands(app, context);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForAllHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForVersion& version) {
    return app.exit(version);
  } catch (const CLI::ParseError& error) {
    std::cerr << "hugepin: error: " << error.what() << " (see hugepin --help)\n";
    return 2;
  }

  log::set_level(quiet ? log::Level::kQuiet : verbose ? log::Level::kInfo : log::Level::kWarn);
  try {
    return context.action ? context.action() : 0;
  } catch (const cli::UsageError& error) {
    std::cerr << "hugepin: error: " << error.what() << "\n";
    return 2;
  } catch (const Error& error) {
    std::cerr << "hugepin: error: " << error.what() << "\n";
    return 1;
  } catch (const std::exception& error) {
    std::cerr << "hugepin: internal error: " << error.what() << "\n";
    return 1;
  }
}
