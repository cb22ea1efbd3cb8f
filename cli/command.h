// What every `hugepin` subcommand shares: how it registers, how it runs, how it reports.
//
// A subcommand's parse callback only records what to run (Context::action); main() runs it after
// parsing succeeds, so that a usage error is always reported before anything changes.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/error.h"
#include "base/os.h"

namespace hugepin::cli {

using Json = nlohmann::ordered_json;

// Bad usage found after parsing (a value that parses but cannot be right): exit status 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

struct Context {
  std::string sysroot = "/";                 // --sysroot: where /sys and /proc are read
  std::function<int()> action;               // set by the chosen subcommand
  std::unique_ptr<Os> rooted_os;

  // The Os for this run: the real kernel, or one rooted at --sysroot.
  Os& os();
};

// Registration, one per command file.
void add_pool_commands(CLI::App& app, Context& context);
void add_arena_commands(CLI::App& app, Context& context);
// `arena save|load`, under the `arena` command: call after add_arena_commands.
void add_snapshot_commands(CLI::App& app, Context& context);
void add_plan_command(CLI::App& app, Context& context);
void add_demo_command(CLI::App& app, Context& context);
void add_bench_commands(CLI::App& app, Context& context);
void add_shim_commands(CLI::App& app, Context& context);
void add_inspect_commands(CLI::App& app, Context& context);
void add_daemon_commands(CLI::App& app, Context& context);

// --- helpers for command files ---

// Makes `run` the action of `command` once it is chosen (its parse callback sets
// Context::action; main() runs it after parsing succeeded).
void run_when_chosen(CLI::App* command, Context& context, std::function<int()> run);

// A CLI11 validator for sizes ("4G", "512MiB", "1048576").
CLI::Validator size_validator();
// Parses a value size_validator() accepted.
uint64_t size_value(const std::string& text);

// A CLI11 validator for page sizes: 4K, 2M, 1G (and "auto" when `allow_auto`).
CLI::Validator page_size_validator(bool allow_auto);
// 0 for "auto", else the page size in bytes.
uint64_t page_size_value(const std::string& text);

// A CLI11 validator for a number of seconds (or any real) from `min` to `max`: NaN and the
// infinities are refused by name (CLI::Range lets NaN through: no comparison with it is true).
CLI::Validator finite_range(double min, double max);

// A CLI11 validator for arena names (hugemem/naming.h): `metrics ../../x` is bad usage, exit 2.
CLI::Validator arena_name_validator();

// Prints `json` to stdout, indented, with a final newline.
void print_json(const Json& json);

}  // namespace hugepin::cli
