// `hugepin bench offload`: registered under `hugepin bench` (cli/cmd_bench.cc).
#pragma once

#include "cli/command.h"

namespace hugepin::cli {

void add_offload_bench_command(CLI::App& bench, Context& context);

}  // namespace hugepin::cli
