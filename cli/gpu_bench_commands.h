// The GPU benchmarks of `hugepin bench`: copy, overlap, and the GPU rows of pin. In a build
// without CUDA they are registered too and say so when run.
#pragma once

#include <string>

#include "cli/command.h"

namespace hugepin::cli {

// Adds `bench copy` and `bench overlap` under `bench`.
void add_gpu_bench_commands(CLI::App& bench, Context& context);

struct GpuPinArgs {
  std::string size;
  std::string page_size;
  std::string chunk = "64G";
  unsigned pin_threads = 4;
  unsigned repeat = 3;
  std::string methods;
  std::string dir;
  bool json = false;
};

// True when this build and machine can run the GPU rows of `bench pin`.
bool gpu_bench_available();
// Runs the GPU rows of `bench pin`: prints their table, or with args.json returns them as JSON.
Json run_gpu_pin_rows(const GpuPinArgs& args);

}  // namespace hugepin::cli
