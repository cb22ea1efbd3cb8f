#include "cli/gpu_bench_commands.h"

#include <unistd.h>

#include <iostream>
#include <sstream>

#include "base/size.h"
#include "base/table.h"
#include "dma/copy_engine.h"

#if HUGEPIN_HAVE_CUDA
#include "bench/gpu_copy_bench.h"
#include "bench/gpu_overlap_bench.h"
#include "bench/gpu_pin_bench.h"
#endif

namespace hugepin::cli {
namespace {

[[noreturn]] void no_gpu() {
  throw Error(cuda_available() ? "internal: GPU benchmark unavailable"
                               : "this benchmark needs an NVIDIA GPU and a build with CUDA (none found)");
}

[[maybe_unused]] std::function<void(const std::string&)> progress_line() {
  const bool tty = isatty(STDERR_FILENO) != 0;
  return [tty](const std::string& line) {
    if (tty) std::cerr << "\r\033[K  " << line << std::flush;
  };
}

[[maybe_unused]] void end_progress() {
  if (isatty(STDERR_FILENO) != 0) std::cerr << "\r\033[K";
}

[[maybe_unused]] std::vector<uint64_t> size_list(const std::vector<std::string>& texts) {
  std::vector<uint64_t> sizes;
  for (const std::string& text : texts) sizes.push_back(size_value(text));
  return sizes;
}

#if HUGEPIN_HAVE_CUDA
Json summary_json(const bench::Summary& s) { return {{"median", s.median}, {"min", s.min}, {"max", s.max}}; }

int run_copy(const bench::GpuCopyOptions& options, bool json) {
  if (!cuda_available()) no_gpu();
  std::vector<bench::GpuCopyRow> rows = bench::run_gpu_copy_bench(options, progress_line());
  end_progress();
  if (json) {
    Json out = Json::array();
    for (const auto& row : rows) {
      out.push_back({{"block_bytes", row.block_bytes}, {"direction", row.direction}, {"method", row.method},
                     {"gb_per_second", summary_json(row.gbps)}});
    }
    print_json({{"benchmark", "copy"}, {"bytes", options.bytes}, {"sm_blocks", options.sm_blocks},
                {"repeat", options.repeat}, {"rows", out}});
    return 0;
  }
  std::cout << "scattered block copies, " << format_bytes(options.bytes) << " per run, GB/s (median of "
            << options.repeat << "); SM kernels on " << options.sm_blocks << " thread blocks\n";
  Table table({"BLOCK", "DIR", "CONTIG", "PER-BLOCK", "BATCH", "SM", "SM-BULK", "AUTO", "AUTO IS", "AUTO/CONTIG"},
              {Table::Align::kRight, Table::Align::kLeft});
  for (size_t i = 0; i < rows.size(); i += 6) {
    // Rows come as contiguous, per-block, batch, sm, sm-bulk, auto(...) for one block and direction.
    const auto& contiguous = rows[i];
    std::vector<std::string> cells{page_size_name(contiguous.block_bytes), contiguous.direction};
    for (size_t k = 0; k < 6; ++k) cells.push_back(fixed(rows[i + k].gbps.median, 1));
    cells.push_back(rows[i + 5].method.substr(5, rows[i + 5].method.size() - 6));
    cells.push_back(fixed(100.0 * rows[i + 5].gbps.median / contiguous.gbps.median, 1) + "%");
    table.add_row(cells);
  }
  std::cout << table.render();
  return 0;
}

int run_overlap(const bench::OverlapOptions& options, bool json) {
  if (!cuda_available()) no_gpu();
  std::vector<bench::OverlapRow> rows = bench::run_overlap_bench(options, progress_line());
  end_progress();
  if (json) {
    Json out = Json::array();
    for (const auto& row : rows) {
      out.push_back({{"backend", row.backend}, {"tflops", summary_json(row.tflops)}, {"slowdown", row.slowdown},
                     {"copy_gb_per_second", row.copy_gbps}});
    }
    print_json({{"benchmark", "overlap"}, {"matmul_size", options.matmul_size}, {"block_bytes", options.block_bytes},
                {"rows", out}});
    return 0;
  }
  std::cout << "bf16 " << options.matmul_size << "^3 matmuls (cuBLAS) while each backend copies "
            << format_bytes(options.block_bytes) << " blocks both ways\n";
  Table table({"COPIES", "MATMUL TFLOP/s", "SPREAD", "SLOWDOWN", "COPY GB/s"}, {Table::Align::kLeft});
  for (const auto& row : rows) {
    table.add_row({row.backend, fixed(row.tflops.median, 1), fixed(100 * row.tflops.spread(), 1) + "%",
                   row.backend == "none" ? "-" : fixed(100 * row.slowdown, 2) + "%",
                   row.backend == "none" ? "-" : fixed(row.copy_gbps, 1)});
  }
  std::cout << table.render();
  return 0;
}
#endif

struct CopyArgs {
  std::vector<std::string> blocks{"4K", "16K", "64K", "256K", "1M", "4M"};
  std::string bytes = "1G";
  unsigned repeat = 5;
  unsigned sm_blocks = 4;
  std::string sm_slice = "0";
  std::string sm_below = "1M";
  int device = 0;
  std::string page_size = "auto";
  std::string dir;
  bool json = false;
};

int bench_copy(const CopyArgs& args) {
#if HUGEPIN_HAVE_CUDA
  bench::GpuCopyOptions options;
  options.block_sizes = size_list(args.blocks);
  options.bytes = size_value(args.bytes);
  options.repeat = args.repeat;
  options.sm_blocks = args.sm_blocks;
  options.sm_slice_bytes = size_value(args.sm_slice);
  options.auto_sm_below = size_value(args.sm_below);
  options.device = args.device;
  options.page_size = page_size_value(args.page_size);
  options.hugetlbfs_dir = args.dir;
  for (uint64_t block : options.block_sizes) {
    if (block == 0 || block > options.bytes) throw UsageError(cat("--blocks: ", block, " must be within 1..--bytes"));
  }
  return run_copy(options, args.json);
#else
  (void)args;
  no_gpu();
#endif
}

void add_copy_bench(CLI::App& bench, Context& context) {
  auto args = std::make_shared<CopyArgs>();
  CLI::App* copy = bench.add_subcommand("copy", "Scattered block copies: every backend vs cudaMemcpyAsync per block, batch, contiguous");
  copy->add_option("--blocks", args->blocks, "Block sizes, comma-separated")->delimiter(',')->check(size_validator());
  copy->add_option("--bytes", args->bytes, "Bytes per run and direction")->check(size_validator());
  copy->add_option("--repeat", args->repeat, "Runs per row")->check(CLI::Range(1, 100));
  copy->add_option("--sm-blocks", args->sm_blocks, "Thread blocks of the SM kernels")->check(CLI::Range(1, 1024));
  copy->add_option("--sm-slice", args->sm_slice, "Most bytes per SM kernel (0: one kernel per launch)")
      ->check(size_validator());
  copy->add_option("--sm-below", args->sm_below,
                   "auto: an SM kernel for blocks smaller than this, batched DMA from it up (both directions)")
      ->check(size_validator());
  copy->add_option("--device", args->device, "GPU to copy to and from")->check(CLI::Range(0, 63));
  copy->add_option("--pagesize", args->page_size, "Host region page size")->check(page_size_validator(true));
  copy->add_option("--dir", args->dir, "hugetlbfs mount to use");
  copy->add_flag("--json", args->json, "Print JSON");
  run_when_chosen(copy, context, [args] { return bench_copy(*args); });
}

struct OverlapArgs {
  std::string block = "16K";
  std::string bytes = "512M";
  unsigned size = 8192;
  unsigned repeat = 5;
  unsigned sm_blocks = 4;
  std::string sm_slice = "0";
  std::string page_size = "auto";
  bool json = false;
};

int bench_overlap(const OverlapArgs& args) {
#if HUGEPIN_HAVE_CUDA
  bench::OverlapOptions options;
  options.block_bytes = size_value(args.block);
  options.copy_bytes = size_value(args.bytes);
  options.matmul_size = args.size;
  options.repeat = args.repeat;
  options.sm_blocks = args.sm_blocks;
  options.sm_slice_bytes = size_value(args.sm_slice);
  options.page_size = page_size_value(args.page_size);
  return run_overlap(options, args.json);
#else
  (void)args;
  no_gpu();
#endif
}

void add_overlap_bench(CLI::App& bench, Context& context) {
  auto args = std::make_shared<OverlapArgs>();
  CLI::App* overlap = bench.add_subcommand("overlap", "Slowdown of a bf16 matmul loop while each backend copies");
  overlap->add_option("--block", args->block, "Block size")->check(size_validator());
  overlap->add_option("--bytes", args->bytes, "Bytes per copy launch and direction")->check(size_validator());
  overlap->add_option("--matmul", args->size, "M = N = K of the matmuls")->check(CLI::Range(256, 32768));
  overlap->add_option("--repeat", args->repeat, "Samples per row")->check(CLI::Range(1, 100));
  overlap->add_option("--sm-blocks", args->sm_blocks, "Thread blocks of the SM kernels")->check(CLI::Range(1, 1024));
  overlap->add_option("--sm-slice", args->sm_slice, "Most bytes per SM kernel (0: one kernel per launch)")
      ->check(size_validator());
  overlap->add_option("--pagesize", args->page_size, "Host region page size")->check(page_size_validator(true));
  overlap->add_flag("--json", args->json, "Print JSON");
  run_when_chosen(overlap, context, [args] { return bench_overlap(*args); });
}

}  // namespace

bool gpu_bench_available() {
#if HUGEPIN_HAVE_CUDA
  return cuda_available();
#else
  return false;
#endif
}

Json run_gpu_pin_rows(const GpuPinArgs& args) {
#if HUGEPIN_HAVE_CUDA
  if (!cuda_available()) no_gpu();
  bench::GpuPinOptions options;
  options.bytes = size_value(args.size);
  options.page_size = page_size_value(args.page_size);
  if (options.page_size == 0) options.page_size = 2 * kMiB;
  options.chunk_bytes = size_value(args.chunk);
  options.pin_threads = args.pin_threads;
  options.repeat = args.repeat;
  options.hugetlbfs_dir = args.dir;
  if (!args.methods.empty()) {
    options.methods.clear();
    std::stringstream list(args.methods);
    for (std::string method; std::getline(list, method, ',');) options.methods.insert(method);
  }
  std::vector<bench::GpuPinRow> rows = bench::run_gpu_pin_bench(options, progress_line());
  end_progress();
  auto median = [&](const char* method) {
    for (const auto& row : rows) {
      if (row.method == method) return row.seconds.median;
    }
    return 0.0;
  };
  if (args.json) {
    Json out = Json::array();
    for (const auto& row : rows) {
      out.push_back({{"method", row.method}, {"seconds", summary_json(row.seconds)}, {"prepare_seconds", summary_json(row.prepare)},
                     {"register_seconds", summary_json(row.registration)}, {"chunks", row.chunks}});
    }
    return {{"bytes", options.bytes}, {"chunk_bytes", options.chunk_bytes}, {"pin_threads", options.pin_threads},
            {"repeat", options.repeat}, {"rows", out}};
  }
  std::cout << "\ntime until " << format_bytes(options.bytes) << " is usable for GPU copies (median of "
            << options.repeat << "; seconds)\n";
  Table table({"METHOD", "PREPARE", "REGISTER", "TOTAL", "SPREAD", "CHUNKS", "vs cudaHostAlloc", "vs 4K+register",
               "vs bare"},
              {Table::Align::kLeft});
  const double host_alloc = median("cudaHostAlloc");
  const double small = median("4k-register");
  const double bare = median("bare-register");
  auto ratio = [](double base, double ours) { return base > 0 && ours > 0 ? fixed(base / ours, 2) + "x" : std::string("-"); };
  for (const auto& row : rows) {
    table.add_row({row.method, fixed(row.prepare.median, 3), fixed(row.registration.median, 3),
                   fixed(row.seconds.median, 3), fixed(100 * row.seconds.spread(), 0) + "%",
                   row.chunks == 0 ? "-" : std::to_string(row.chunks), ratio(host_alloc, row.seconds.median),
                   ratio(small, row.seconds.median), ratio(bare, row.seconds.median)});
  }
  std::cout << table.render();
  return Json();
#else
  (void)args;
  no_gpu();
#endif
}

void add_gpu_bench_commands(CLI::App& bench, Context& context) {
  add_copy_bench(bench, context);
  add_overlap_bench(bench, context);
}

}  // namespace hugepin::cli
