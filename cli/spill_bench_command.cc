#include "cli/spill_bench_command.h"

#include <unistd.h>

#include <iostream>

#include "base/size.h"
#include "base/table.h"
#include "bench/spill_bench.h"
#include "cli/interruption.h"

namespace hugepin::cli {
namespace {

struct SpillArgs {
  std::string dir = "/var/tmp";
  std::string size = "1G";
  std::string chunk = "2M";
  unsigned job_chunks = 8;
  unsigned queue_depth = 32;
  unsigned batch = 8;
  std::string request = "2M";
  unsigned threads = 8;
  unsigned repeat = 3;
  std::string page_size = "auto";
  std::vector<std::string> methods;
  bool json = false;
};

Json summary_json(const bench::Summary& summary) {
  return {{"median", summary.median}, {"min", summary.min}, {"max", summary.max}};
}

// The row of `method` in the same direction as `row`.
const bench::SpillBenchRow* find_row(const bench::SpillBenchReport& report, const bench::SpillBenchRow& row,
                                     std::string_view method) {
  for (const bench::SpillBenchRow& other : report.rows) {
    if (other.direction == row.direction && other.method.starts_with(method)) return &other;
  }
  return nullptr;
}

double ratio(const bench::SpillBenchRow& row, const bench::SpillBenchRow* base) {
  return base != nullptr && base->gb_per_second.median > 0 ? row.gb_per_second.median / base->gb_per_second.median : 0;
}

Json ratio_json(const bench::SpillBenchRow& row, const bench::SpillBenchRow* base) {
  return base != nullptr ? Json(ratio(row, base)) : Json(nullptr);
}

// "1.46x", or "93%" as a share of the limit; "-" when the row compared against was not run.
std::string ratio_cell(const bench::SpillBenchRow& row, const bench::SpillBenchRow* base, bool percent) {
  if (base == nullptr) return "-";
  return percent ? fixed(100 * ratio(row, base), 0) + "%" : fixed(ratio(row, base), 2) + "x";
}

int run_spill(Context& context, const SpillArgs& args) {
  bench::SpillBenchOptions options;
  options.dir = args.dir;
  options.bytes = size_value(args.size);
  options.chunk_bytes = size_value(args.chunk);
  options.job_chunks = args.job_chunks;
  options.queue_depth = args.queue_depth;
  options.submit_batch = args.batch;
  options.request_bytes = size_value(args.request);
  options.threads = args.threads;
  options.repeat = args.repeat;
  options.page_size = page_size_value(args.page_size);
  options.methods = args.methods;
  if (options.bytes == 0 || options.bytes % (4 * kKiB) != 0) throw UsageError(cat("--size ", args.size, ": not a non-zero multiple of 4K"));
  if (options.chunk_bytes == 0 || options.chunk_bytes % (4 * kKiB) != 0) {
    throw UsageError(cat("--chunk ", args.chunk, ": not a non-zero multiple of 4K"));
  }
  // O_DIRECT moves whole 4 KiB blocks; a request of 3 bytes would never finish.
  if (options.request_bytes < 4 * kKiB || options.request_bytes % (4 * kKiB) != 0) {
    throw UsageError(cat("--request ", args.request, ": not a multiple of 4K of at least 4K"));
  }
  const bool show_progress = isatty(STDERR_FILENO) != 0;
  // Ctrl-C between runs removes the arena and the file the benchmark made (its destructors).
  Interruption interruption;
  auto progress = [&](const std::string& line) {
    interruption.check("benchmarking spill");
    if (show_progress) std::cerr << "\r\033[K  " << line << std::flush;
  };
  bench::SpillBenchReport report = bench::run_spill_bench(context.os(), options, progress);
  if (show_progress) std::cerr << "\r\033[K";

  if (args.json) {
    Json rows = Json::array();
    for (const bench::SpillBenchRow& row : report.rows) {
      rows.push_back({{"method", row.method},
                      {"direction", row.direction},
                      {"engine", row.detail},
                      {"gb_per_second", summary_json(row.gb_per_second)},
                      {"cpu_seconds_per_gb", summary_json(row.cpu_seconds_per_gb)},
                      {"vs_pool", ratio_json(row, find_row(report, row, "pread/pwrite pool O_DIRECT"))},
                      {"vs_device", ratio_json(row, find_row(report, row, "device sequential"))}});
    }
    print_json({{"benchmark", "spill"},
                {"file", report.file},
                {"file_system", report.file_system},
                {"bytes", options.bytes},
                {"chunk_bytes", options.chunk_bytes},
                {"job_chunks", options.job_chunks},
                {"page_size", report.page_size},
                {"repeat", options.repeat},
                {"page_cache", report.cache_note},
                {"rows", rows}});
    return 0;
  }
  std::cout << "spill " << format_bytes(options.bytes) << " of " << page_size_name(report.page_size)
            << "-page memory in " << format_bytes(options.chunk_bytes) << " chunks (random order, jobs of "
            << options.job_chunks << ") to " << report.file << " (" << report.file_system << "); median of "
            << options.repeat << "\n";
  Table table({"METHOD", "DIR", "GB/s", "SPREAD", "CPU s/GB", "vs pool", "vs device"}, {Table::Align::kLeft, Table::Align::kLeft});
  for (const bench::SpillBenchRow& row : report.rows) {
    table.add_row({row.method, row.direction, fixed(row.gb_per_second.median, 2), fixed(100 * row.gb_per_second.spread(), 0) + "%",
                   fixed(row.cpu_seconds_per_gb.median, 3), ratio_cell(row, find_row(report, row, "pread/pwrite pool O_DIRECT"), false),
                   ratio_cell(row, find_row(report, row, "device sequential"), true)});
  }
  std::cout << table.render() << report.cache_note << "\n";
  for (const bench::SpillBenchRow& row : report.rows) {
    if (row.direction == "write") std::cout << "  " << row.method << ": " << row.detail << "\n";
  }
  return 0;
}

}  // namespace

void add_spill_bench_command(CLI::App& bench, Context& context) {
  auto args = std::make_shared<SpillArgs>();
  CLI::App* spill = bench.add_subcommand(
      "spill", "Spill to disk: io_uring (fixed buffers, O_DIRECT) vs pread/pwrite thread pools, both directions");
  spill->add_option("--dir", args->dir, "Directory on the disk under test")->check(CLI::ExistingDirectory);
  spill->add_option("--size", args->size, "Bytes spilled per run")->check(size_validator());
  spill->add_option("--chunk", args->chunk, "Chunk size")->check(size_validator());
  spill->add_option("--job-chunks", args->job_chunks, "Chunks per submitted job")->check(CLI::Range(1, 1 << 20));
  spill->add_option("--qd", args->queue_depth, "io_uring queue depth")->check(CLI::Range(1, 4096));
  spill->add_option("--batch", args->batch, "io_uring requests per submit")->check(CLI::Range(1, 4096));
  spill->add_option("--request", args->request, "Largest request")->check(size_validator());
  spill->add_option("--threads", args->threads, "Thread-pool threads")->check(CLI::Range(1, 1024));
  spill->add_option("--repeat", args->repeat, "Runs per row")->check(CLI::Range(1, 100));
  spill->add_option("--pagesize", args->page_size, "Page size of the memory spilled")->check(page_size_validator(true));
  spill->add_option("--methods", args->methods, "Rows, comma-separated: uring,pool,buffered,device (default: all)")
      ->delimiter(',')
      ->check(CLI::IsMember({"uring", "pool", "buffered", "device"}));
  spill->add_flag("--json", args->json, "Print JSON");
  spill->callback([&context, args] { context.action = [&context, args] { return run_spill(context, *args); }; });
}

}  // namespace hugepin::cli
