// `hugepin bench spill`: the disk tier's benchmark (bench/spill_bench.h). In its own file so that
// cmd_bench.cc, which other benchmarks extend, gains one line for it.
#pragma once

#include "cli/command.h"

namespace hugepin::cli {

// Adds `bench spill` under `bench`.
void add_spill_bench_command(CLI::App& bench, Context& context);

}  // namespace hugepin::cli
