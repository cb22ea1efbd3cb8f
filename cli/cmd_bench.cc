// hugepin bench ...: side-by-side benchmarks. Each prints one table (JSON with --json): ours,
// the alternative users have now, and the ratio.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <thread>

#include "base/size.h"
#include "base/table.h"
#include "bench/fence_bench.h"
#include "bench/host_pin_bench.h"
#include "bench/ring_bench.h"
#include "cli/command.h"
#include "cli/gpu_bench_commands.h"
#include "cli/offload_bench_command.h"
#include "cli/spill_bench_command.h"
#include "ipc/ring_prefetch.h"
#include "protocol/report.h"

namespace hugepin::cli {
namespace {

struct PinArgs {
  std::string size = "4G";
  std::vector<std::string> threads{"1", "2", "all"};
  std::string page_size = "2M";
  unsigned repeat = 3;
  unsigned warmup = 1;
  std::string dir;
  bool json = false;
  std::string gpu = "auto";  // GPU rows: auto (when a GPU answers), on, off
  // Host rows (arena vs 4 KiB touch). Off lets a large --size run its GPU rows in turns: the
  // 4 KiB row needs --size of ordinary memory beside a pool of --size, which a 64 GiB run on a
  // 128 GiB host does not have.
  bool host = true;
  GpuPinArgs gpu_args;
};

std::vector<unsigned> thread_counts(const std::vector<std::string>& texts) {
  std::vector<unsigned> counts;
  for (const std::string& text : texts) {
    if (text == "all") {
      counts.push_back(std::max(1u, std::thread::hardware_concurrency()));
      continue;
    }
    char* end = nullptr;
    unsigned long value = std::strtoul(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || value == 0 || value > 1024) {
      throw UsageError(cat("--threads: '", text, "' is not a thread count (1-1024 or all)"));
    }
    counts.push_back(static_cast<unsigned>(value));
  }
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

std::string seconds_cell(const bench::Summary& summary) { return fixed(summary.median, 3); }

int run_pin(Context& context, const PinArgs& args) {
  bench::HostPinOptions options;
  options.bytes = size_value(args.size);
  options.page_size = page_size_value(args.page_size);
  options.thread_counts = thread_counts(args.threads);
  options.repeat = args.repeat;
  options.hugetlbfs_dir = args.dir;
  options.warmup = args.warmup;
  const bool show_progress = isatty(STDERR_FILENO) != 0;
  auto progress = [&](const std::string& line) {
    if (show_progress) std::cerr << "\r\033[K  " << line << std::flush;
  };
  const bool gpu = args.gpu == "on" || (args.gpu == "auto" && gpu_bench_available());
  if (!args.host && !gpu) throw UsageError("--host off: no GPU rows either (no GPU answered, or --gpu off): nothing to run");
  std::vector<bench::HostPinRow> rows;
  if (args.host) rows = bench::run_host_pin_bench(context.os(), options, progress);
  if (show_progress) std::cerr << "\r\033[K";

  GpuPinArgs gpu_args = args.gpu_args;
  gpu_args.size = args.size;
  gpu_args.page_size = args.page_size;
  gpu_args.repeat = args.repeat;
  gpu_args.dir = args.dir;
  gpu_args.json = args.json;
  if (args.json) {
    Json json_rows = Json::array();
    for (const bench::HostPinRow& row : rows) {
      auto summary = [](const bench::Summary& s) { return Json{{"median", s.median}, {"min", s.min}, {"max", s.max}}; };
      json_rows.push_back({{"method", row.method}, {"threads", row.threads}, {"page_size", row.page_size},
                           {"reserve_seconds", summary(row.reserve)}, {"fault_seconds", summary(row.fault)},
                           {"verify_seconds", summary(row.verify)}, {"total_seconds", summary(row.total)},
                           {"gb_per_second", static_cast<double>(options.bytes) / row.total.median / 1e9}});
    }
    Json out{{"benchmark", "pin"}};
    if (args.host) {
      out["host"] = {{"bytes", options.bytes}, {"repeat", options.repeat}, {"warmup", options.warmup}, {"rows", json_rows}};
    }
    if (gpu) out["gpu"] = run_gpu_pin_rows(gpu_args);
    print_json(out);
    return 0;
  }
  if (!args.host) {
    run_gpu_pin_rows(gpu_args);
    return 0;
  }
  std::cout << "time until " << format_bytes(options.bytes)
            << " of host memory is faulted in (median of " << options.repeat << "; seconds)\n";
  Table table({"METHOD", "THREADS", "RESERVE", "FAULT", "VERIFY", "TOTAL", "SPREAD", "GB/s", "vs 4K"},
              {Table::Align::kLeft});
  for (size_t i = 0; i < rows.size(); ++i) {
    const bench::HostPinRow& row = rows[i];
    // Rows come in pairs, arena then 4 KiB, at the same thread count.
    const bench::HostPinRow& baseline = rows[i % 2 == 0 ? i + 1 : i];
    table.add_row({row.method, std::to_string(row.threads), seconds_cell(row.reserve), seconds_cell(row.fault),
                   seconds_cell(row.verify), seconds_cell(row.total), fixed(100 * row.total.spread(), 0) + "%",
                   fixed(static_cast<double>(options.bytes) / row.total.median / 1e9, 2),
                   fixed(baseline.total.median / row.total.median, 2) + "x"});
  }
  std::cout << table.render();
  if (gpu) run_gpu_pin_rows(gpu_args);
  return 0;
}

struct FenceArgs {
  std::vector<uint32_t> ranks{2, 4, 8, 16, 32, 64, 128, 256};
  uint32_t jobs_per_step = 8;
  uint32_t chunks_per_job = 4;
  uint64_t reports = 2000000;
  unsigned repeat = 5;
  unsigned warmup = 1;
  bool json = false;
};

Json summary_json(const bench::Summary& s) { return Json{{"median", s.median}, {"min", s.min}, {"max", s.max}}; }

int run_fence(const FenceArgs& args) {
  bench::FenceBenchOptions options;
  options.rank_counts = args.ranks;
  options.jobs_per_step = args.jobs_per_step;
  options.chunks_per_job = args.chunks_per_job;
  options.reports = args.reports;
  options.repeat = args.repeat;
  options.warmup = args.warmup;
  const bool show_progress = isatty(STDERR_FILENO) != 0;
  auto progress = [&](const std::string& line) {
    if (show_progress) std::cerr << "\r\033[K  " << line << std::flush;
  };
  try {
    bench::check_fence_bench_options(options);
  } catch (const Error& error) {
    throw UsageError(error.what());
  }
  std::vector<bench::FenceBenchRow> rows = bench::run_fence_bench(options, progress);
  if (show_progress) std::cerr << "\r\033[K";

  if (args.json) {
    Json json_rows = Json::array();
    for (const bench::FenceBenchRow& row : rows) {
      json_rows.push_back({{"ranks", row.ranks}, {"reports", row.reports}, {"steps", row.steps},
                           {"ours_reports_per_second", summary_json(row.ours)},
                           {"baseline_reports_per_second", summary_json(row.baseline)},
                           {"ratio", row.ours.median / row.baseline.median}});
    }
    print_json({{"benchmark", "fence"}, {"jobs_per_step", options.jobs_per_step},
                {"chunks_per_job", options.chunks_per_job}, {"chunks", options.chunks}, {"repeat", options.repeat},
                {"warmup", options.warmup}, {"target_reports_per_second", 20e6}, {"rows", json_rows}});
    return 0;
  }
  std::cout << "copy-complete and compute-release reports applied per second of one core's CPU time (median of "
            << options.repeat << "; " << options.jobs_per_step << " jobs of " << options.chunks_per_job
            << " chunks per step; target >= 20 M/s)\n";
  Table table({"TPxPP", "REPORTS", "OURS M/s", "SPREAD", "BASELINE M/s", "SPREAD", "vs BASELINE"});
  for (const bench::FenceBenchRow& row : rows) {
    table.add_row({std::to_string(row.ranks), std::to_string(row.reports), fixed(row.ours.median / 1e6, 1),
                   fixed(100 * row.ours.spread(), 0) + "%", fixed(row.baseline.median / 1e6, 2),
                   fixed(100 * row.baseline.spread(), 0) + "%", fixed(row.ours.median / row.baseline.median, 1) + "x"});
  }
  std::cout << table.render();
  std::cout << "baseline: unordered_map<job, set<rank>>, map<chunk, holds>, min over rank epochs per release\n";
  return 0;
}

struct RingArgs {
  uint64_t count = 10'000'000;
  std::vector<uint32_t> batches{1, 32};
  uint64_t latency_samples = 100'000;
  double latency_interval_us = 5;
  unsigned repeat = 5;
  std::vector<int> cpus;
  std::string prefetch = "auto";  // the producer's prefetch: auto (this CPU's default), off, read, write
  bool json = false;
};

std::string ns_cell(double ns) { return ns > 0 ? fixed(ns, 0) : "-"; }

// The median rate of the row of `kind` with the batch of `row` (the spinning one), 0 when none ran.
double rate_of(const std::vector<bench::RingBenchRow>& rows, bench::RingMethod kind, const bench::RingBenchRow& row) {
  for (const bench::RingBenchRow& other : rows) {
    if (other.kind == kind && !other.sleeping_consumer && other.batch == row.batch) return other.reports_per_second.median;
  }
  return 0;
}

Json ratio_json(double ours, double theirs) { return theirs > 0 ? Json(ours / theirs) : Json(nullptr); }
std::string ratio_cell(double ours, double theirs) { return theirs > 0 ? fixed(ours / theirs, 2) + "x" : "-"; }

Json ring_row_json(const std::vector<bench::RingBenchRow>& rows, const bench::RingBenchRow& row) {
  auto summary = [](const bench::Summary& s) { return Json{{"median", s.median}, {"min", s.min}, {"max", s.max}}; };
  const double rate = row.reports_per_second.median;
  Json json = {{"method", row.method},
               {"batch", row.batch},
               {"reports_per_second", summary(row.reports_per_second)},
               {"vs_boost", ratio_json(rate, rate_of(rows, bench::RingMethod::kBoost, row))},
               {"vs_baseline", ratio_json(rate, rate_of(rows, bench::RingMethod::kBaseline, row))}};
  json["wakes_per_report"] = row.wakes_per_report >= 0 ? Json(row.wakes_per_report) : Json(nullptr);
  if (row.latency_p50_ns > 0) {
    json["latency_ns"] = {{"p50", row.latency_p50_ns}, {"p99", row.latency_p99_ns}, {"max", row.latency_max_ns}};
  } else {
    json["latency_ns"] = nullptr;
  }
  return json;
}

int run_ring(Context& context, const RingArgs& args) {
  bench::RingBenchOptions options;
  options.count = args.count;
  options.batches = args.batches;
  options.latency_samples = args.latency_samples;
  options.latency_interval_ns = static_cast<uint64_t>(args.latency_interval_us * 1000);
  options.repeat = args.repeat;
  options.cpus = args.cpus;
  // Before the producers fork: they inherit it (ipc/ring_prefetch.h).
  const std::string vendor = cpu_vendor();
  if (args.prefetch != "auto") set_ring_prefetch(*parse_ring_prefetch(args.prefetch));
  const char* prefetch = ring_prefetch_name(ring_prefetch());
  const std::string prefetch_how =
      args.prefetch == "auto" ? cat("this CPU's default, ", vendor.empty() ? "no CPUID vendor" : vendor) : "--prefetch";
  const bool show_progress = isatty(STDERR_FILENO) != 0;
  auto progress = [&](const std::string& line) {
    if (show_progress) std::cerr << "\r\033[K  " << line << std::flush;
  };
  bench::RingBenchResult result = bench::run_ring_bench(context.os(), options, progress);
  if (show_progress) std::cerr << "\r\033[K";
  const char* publish = result.membarrier_registered ? "registered" : "refused";

  if (args.json) {
    Json rows = Json::array();
    for (const bench::RingBenchRow& row : result.rows) rows.push_back(ring_row_json(result.rows, row));
    print_json({{"benchmark", "ring"}, {"record_bytes", sizeof(Report)}, {"capacity", bench::kRingBenchCapacity},
                {"count", options.count}, {"repeat", options.repeat}, {"latency_samples", options.latency_samples},
                {"latency_interval_ns", options.latency_interval_ns}, {"producer_cpu", result.producer_cpu},
                {"consumer_cpu", result.consumer_cpu}, {"cpus", bench::core_sharing_name(result.core_sharing)},
                {"membarrier", publish}, {"prefetch", prefetch}, {"prefetch_chosen_by", args.prefetch == "auto" ? "cpu" : "option"},
                {"cpu_vendor", vendor}, {"rows", rows}});
    return 0;
  }
  std::cout << "reports between two processes: " << options.count << " per run (median of " << options.repeat
            << "), rings of " << bench::kRingBenchCapacity << " x " << sizeof(Report) << " bytes; latency at one report every "
            << fixed(args.latency_interval_us, 1) << " us; producer on CPU " << result.producer_cpu << ", consumer on CPU "
            << result.consumer_cpu << " (" << bench::core_sharing_name(result.core_sharing) << "); membarrier " << publish
            << "; producer prefetch " << prefetch << " (" << prefetch_how << ")\n";
  Table table({"METHOD", "BATCH", "REPORTS/s", "SPREAD", "vs Boost", "vs v1", "p50 ns", "p99 ns"}, {Table::Align::kLeft});
  for (const bench::RingBenchRow& row : result.rows) {
    const double rate = row.reports_per_second.median;
    table.add_row({row.method, std::to_string(row.batch), fixed(rate / 1e6, 1) + " M",
                   fixed(100 * row.reports_per_second.spread(), 0) + "%",
                   ratio_cell(rate, rate_of(result.rows, bench::RingMethod::kBoost, row)),
                   ratio_cell(rate, rate_of(result.rows, bench::RingMethod::kBaseline, row)), ns_cell(row.latency_p50_ns),
                   ns_cell(row.latency_p99_ns)});
  }
  std::cout << table.render();
  for (const bench::RingBenchRow& row : result.rows) {
    if (row.wakes_per_report >= 0) {
      std::cout << row.method << ": " << fixed(1000 * row.wakes_per_report, 1)
                << " wake-ups per 1000 reports (its rate falls as they rise)\n";
    }
  }
  return 0;
}

}  // namespace

void add_bench_commands(CLI::App& app, Context& context) {
  CLI::App* bench = app.add_subcommand("bench", "Side-by-side benchmarks against what engines use now");
  bench->require_subcommand(1);

  auto pin_args = std::make_shared<PinArgs>();
  CLI::App* pin = bench->add_subcommand("pin", "Time until host memory is ready: arena vs 4 KiB mmap + touch");
  pin->add_option("--size", pin_args->size, "Bytes per run")->check(size_validator());
  pin->add_option("--threads", pin_args->threads, "Thread counts, comma-separated (all = every CPU)")->delimiter(',');
  pin->add_option("--pagesize", pin_args->page_size, "Arena page size")->check(page_size_validator(true));
  pin->add_option("--repeat", pin_args->repeat, "Runs per row")->check(CLI::Range(1, 100));
  pin->add_option("--warmup", pin_args->warmup, "Unmeasured runs first")->check(CLI::Range(0, 100));
  pin->add_option("--dir", pin_args->dir, "hugetlbfs mount to use");
  pin->add_flag("--json", pin_args->json, "Print JSON");
  pin->add_option("--gpu", pin_args->gpu, "GPU rows: auto (when a GPU answers), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  pin->add_option_function<std::string>(
         "--host", [pin_args](const std::string& value) { pin_args->host = value == "on"; },
         "Host rows (arena vs 4 KiB touch): on (default), off")
      ->check(CLI::IsMember({"on", "off"}));
  pin->add_option("--chunk", pin_args->gpu_args.chunk, "Largest single registration (at most 64G)")->check(size_validator());
  pin->add_option("--pin-threads", pin_args->gpu_args.pin_threads, "Registrations in flight")->check(CLI::Range(1, 64));
  pin->add_option("--methods", pin_args->gpu_args.methods,
                  "GPU rows, comma-separated: arena-cold,arena-warm,bare-register,cudaHostAlloc,4k-register");
  pin->callback([&context, pin_args] { context.action = [&context, pin_args] { return run_pin(context, *pin_args); }; });

  auto fence_args = std::make_shared<FenceArgs>();
  CLI::App* fence = bench->add_subcommand(
      "fence", "Reports per second through copy pins, quorum and fence vs general-purpose containers");
  fence->add_option("--ranks", fence_args->ranks, "TP x PP values, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024));
  fence->add_option("--jobs", fence_args->jobs_per_step, "Copy jobs dispatched per step")->check(CLI::Range(1, 1024));
  fence->add_option("--chunks-per-job", fence_args->chunks_per_job, "Chunks per job")->check(CLI::Range(1, 64));
  fence->add_option("--reports", fence_args->reports, "Reports per run")->check(CLI::Range(1000, 1000000000));
  fence->add_option("--repeat", fence_args->repeat, "Runs per row")->check(CLI::Range(1, 100));
  fence->add_option("--warmup", fence_args->warmup, "Unmeasured runs first")->check(CLI::Range(0, 100));
  fence->add_flag("--json", fence_args->json, "Print JSON");
  fence->callback([&context, fence_args] { context.action = [fence_args] { return run_fence(*fence_args); }; });

  add_gpu_bench_commands(*bench, context);
  add_spill_bench_command(*bench, context);
  add_offload_bench_command(*bench, context);
  auto ring_args = std::make_shared<RingArgs>();
  CLI::App* ring = bench->add_subcommand(
      "ring", "Reports between two processes: hugepin's ring vs its previous version and Boost.Lockfree spsc_queue");
  ring->add_option("--count", ring_args->count, "Reports per throughput run")->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  ring->add_option("--batch", ring_args->batches, "Batch sizes, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(1u, bench::kRingBenchCapacity));
  ring->add_option("--latency-samples", ring_args->latency_samples, "Reports in each latency run")
      ->check(CLI::Range(uint64_t{100}, uint64_t{1} << 32));
  ring->add_option("--interval", ring_args->latency_interval_us, "Microseconds between reports in latency runs")
      ->check(finite_range(0.1, 1e6));
  ring->add_option("--repeat", ring_args->repeat, "Throughput runs per row")->check(CLI::Range(1, 100));
  ring->add_option("--cpus", ring_args->cpus, "PRODUCER,CONSUMER CPUs (default: two of different cores)")
      ->delimiter(',')
      ->expected(2)
      ->check(CLI::Range(0, CPU_SETSIZE - 1));
  ring->add_option("--prefetch", ring_args->prefetch,
                   "Producer's prefetch of the slots past a batch: auto (this CPU's default), off, read or write")
      ->check(CLI::IsMember({"auto", "off", "read", "write"}))
      ->capture_default_str();
  ring->add_flag("--json", ring_args->json, "Print JSON");
  ring->callback([&context, ring_args] { context.action = [&context, ring_args] { return run_ring(context, *ring_args); }; });
}

}  // namespace hugepin::cli
