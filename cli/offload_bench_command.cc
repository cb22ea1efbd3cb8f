// hugepin bench offload: the whole offload path beside the copy engine alone and the engines' way
// (bench/offload_bench.h says what each row does and what each column measures).
#include "cli/offload_bench_command.h"

#include <unistd.h>

#include <iostream>
#include <optional>

#include "base/size.h"
#include "base/table.h"
#include "bench/offload_bench.h"
#include "cli/interruption.h"

namespace hugepin::cli {
namespace {

struct OffloadArgs {
  bench::OffloadBenchOptions options;
  std::vector<std::string> blocks{"16K", "64K"};
  std::vector<std::string> mixes{"mixed", "store", "load"};
  std::string cpu_bytes = "1G";
  double poll_us = 50;
  double completion_poll_us = -1;  // not given: --poll-us, so that both rows poll alike
  double collect_every_us = 0;
  double collect_timeout_us = 1000;
  double wait_slack_us = 0;
  bool rank_threads = false;
  bool json = false;
};

std::string us(double value) { return fixed(value, 1); }

Json rank_threads_json(const bench::OffloadRow& row) {
  Json groups = Json::array();
  for (const bench::RankThreadGroup& group : row.rank_threads) {
    groups.push_back({{"name", group.name},
                      {"threads", group.threads},
                      {"cpu_us_per_job", group.cpu_us_per_job},
                      {"run_queue_wait_us_per_job", group.run_queue_wait_us_per_job}});
  }
  return groups;
}

// "hugepin-rank 180.2 (3.1 waiting), hugepin-landed 40.3 (0.2 waiting), ..."
std::string rank_threads_line(const bench::OffloadRow& row) {
  std::string line;
  for (const bench::RankThreadGroup& group : row.rank_threads) {
    if (!line.empty()) line += ", ";
    line += cat(group.name, " x", group.threads, " ", us(group.cpu_us_per_job), " (",
                us(group.run_queue_wait_us_per_job), " waiting)");
  }
  return line;
}

// A p50/p99 pair from the timed jobs: null when the row timed none (a short row, a large
// --time-every), where 0 would read as a measurement.
Json timed_json(const bench::OffloadRow& row, std::initializer_list<std::pair<const char*, double>> values) {
  if (row.timed_jobs == 0) return nullptr;
  Json out = Json::object();
  for (const auto& [key, value] : values) out[key] = value;
  return out;
}

// A figure that may be missing: null, where 0 would read as measured.
template <typename T>
Json or_null(const std::optional<T>& value) {
  return value ? Json(*value) : Json(nullptr);
}

Json clock_window_json(const bench::OffloadRow& row) {
  Json out = timed_json(row, {{"p50", row.clock_window_p50_us}, {"max", row.clock_window_max_us}});
  if (out.is_null()) return out;
  out["early"] = row.clock_early_jobs;
  Json& ranks = out["rank_p50"] = Json::array();
  for (const std::optional<double>& window : row.rank_clock_window_p50_us) ranks.push_back(or_null(window));
  return out;
}

// How hugepin's scheduler's sleeps on the report gate ended (session/scheduler_session.h); null in
// the engine way's rows.
Json gate_waits_json(const bench::OffloadRow& row) {
  if (!row.gate_waits) return nullptr;
  return {{"waits", row.gate_waits->waits},
          {"timed_out", row.gate_waits->timed_out},
          {"woken_late", row.gate_waits->woken_late},
          {"no_wake", row.gate_waits->no_wake}};
}

// Where the slowest SEEN times went (bench/scheduler_stalls.h); null for the copy engine rows.
Json stalls_json(const bench::OffloadRow& row) {
  if (row.path == bench::OffloadPath::kCopyEngine) return nullptr;
  Json late = Json::array();
  for (const bench::OffloadRow::LateSeen& job : row.late_seen) {
    late.push_back({{"seen_us", job.seen_us},
                    {"outside_collect_us", job.outside_collect_us},
                    {"collect_call_us", or_null(job.collect_call_us)}});
  }
  return {{"late_seen_jobs", late},
          {"late_seen_busy_share", or_null(row.late_seen_busy_share)},
          {"late_seen_after_timeout_share", or_null(row.late_seen_after_timeout_share)},
          {"longest_outside_collect_us", row.longest_outside_collect_us},
          {"run_queue_wait_us_per_job", or_null(row.scheduler_run_queue_wait_us_per_job)},
          {"collect_timeouts", or_null(row.collect_timeouts)},
          {"steal_share", row.steal_share},
          {"gate_waits", gate_waits_json(row)}};
}

Json row_json(const bench::OffloadRow& row) {
  return {{"block_bytes", row.block_bytes},
          {"mix", bench::mix_name(row.mix)},
          {"path", bench::path_name(row.path)},
          {"seconds", row.seconds},
          {"jobs", row.jobs},
          {"timed_jobs", row.timed_jobs},
          {"bytes", row.bytes},
          {"gb_per_second", row.gb_per_second},
          {"of_ceiling", row.of_ceiling},
          {"settle_us", {{"p50", row.settle_p50_us}, {"p99", row.settle_p99_us}}},
          {"copy_us", timed_json(row, {{"p50", row.copy_p50_us}})},
          {"overhead_us", timed_json(row, {{"p50", row.overhead_p50_us}, {"p99", row.overhead_p99_us}})},
          {"landed_us", timed_json(row, {{"p50", row.landed_p50_us}, {"p99", row.landed_p99_us}})},
          {"seen_us", timed_json(row, {{"p50", row.seen_p50_us}, {"p99", row.seen_p99_us}})},
          {"clock_window_us", clock_window_json(row)},
          {"scheduler_cpu_us_per_job", row.cpu_us_per_job},
          {"scheduler_cpu_us_per_job_rank", row.cpu_us_per_job_rank},
          {"scheduler_loop_cpu_us_per_job", row.loop_cpu_us_per_job},
          {"scheduler_sleeps_per_job", row.sleeps_per_job},
          {"ranks_cpu_us_per_job", row.ranks_cpu_us_per_job},
          {"mean_jobs_in_flight", row.mean_jobs_in_flight},
          {"no_job_share", row.no_job_share},
          {"rank_threads", rank_threads_json(row)},
          {"reports_per_second", row.reports_per_second},
          {"scheduler_stalls", stalls_json(row)},
          {"chunks_checked", row.chunks_checked},
          {"slots_checked", row.slots_checked}};
}

int run(OffloadArgs& args) {
  bench::OffloadBenchOptions& options = args.options;
  options.block_bytes.clear();
  for (const std::string& text : args.blocks) options.block_bytes.push_back(size_value(text));
  options.mixes.clear();
  options.cpu_bytes = size_value(args.cpu_bytes);
  options.poll_interval_ns = static_cast<int64_t>(args.poll_us * 1000);
  const double completion_poll_us = args.completion_poll_us < 0 ? args.poll_us : args.completion_poll_us;
  options.completion_poll_ns = static_cast<int64_t>(completion_poll_us * 1000);
  options.collect_every_ns = static_cast<int64_t>(args.collect_every_us * 1000);
  options.collect_timeout_ns = static_cast<int64_t>(args.collect_timeout_us * 1000);
  options.wait_slack_ns = static_cast<int64_t>(args.wait_slack_us * 1000);
  try {
    for (const std::string& text : args.mixes) options.mixes.push_back(bench::parse_mix(text));
    bench::check_offload_bench_options(options);
  } catch (const Error& error) {
    throw UsageError(error.what());
  }
  Interruption interruption;  // Ctrl-C ends the run cleanly: ranks stopped, arena removed
  options.check_interrupted = [&interruption] { interruption.check("benchmarking the offload path"); };
  const bool tty = !args.json && isatty(STDERR_FILENO) != 0;
  bench::OffloadBenchResult result = bench::run_offload_bench(options, [tty](const std::string& line) {
    if (tty) std::cerr << "\r\033[K  " << line << std::flush;
  });
  if (tty) std::cerr << "\r\033[K";
  if (args.json) {
    Json rows = Json::array();
    for (const bench::OffloadRow& row : result.rows) rows.push_back(row_json(row));
    print_json({{"benchmark", "offload"},
                {"backend", result.gpu ? "gpu" : "host"},
                {"gpus", result.gpus},
                {"tp", options.tp},
                {"pp", options.pp},
                {"jobs_in_flight", options.jobs_in_flight},
                {"chunks_per_job", options.chunks_per_job},
                {"blocks_per_chunk", options.blocks_per_chunk},
                {"poll_us", args.poll_us},
                {"completion_poll_us", completion_poll_us},
                {"spin", options.spin},
                {"collect_every_us", args.collect_every_us},
                {"collect_timeout_us", args.collect_timeout_us},
                {"wait_slack_us", args.wait_slack_us},
                {"keep_free", options.keep_free_share},
                {"time_every", options.time_every},
                {"chunk_counts", result.chunk_counts},
                {"rows", rows},
                {"sample_verified", true},
                {"chunks_checked", result.chunks_checked},
                {"slots_checked", result.slots_checked}});
    return 0;
  }
  std::cout << "offload path, TP " << options.tp << " x PP " << options.pp << " ranks "
            << (result.gpu ? cat("on ", result.gpus, " GPU(s)") : std::string("with host memcpy (no GPU)")) << ", "
            << options.jobs_in_flight << " jobs of " << options.chunks_per_job << " chunks x "
            << options.blocks_per_chunk << " blocks in flight, " << options.seconds << " s per row\n";
  if (result.gpu && options.spin) {
    std::cout << "copy events asked back to back by both rows' ranks (--spin: a core per rank while copies are out)\n";
  } else if (result.gpu) {
    std::cout << "copy events polled every " << args.poll_us << " us by the engine way's ranks, "
              << (completion_poll_us > 0 ? cat("every ", completion_poll_us, " us") : std::string("waited on asleep"))
              << " by hugepin's\n";
  }
  std::cout << "the scheduler "
            << (args.collect_every_us > 0
                    ? cat("looks once every ", args.collect_every_us, " us without waiting (an engine's step), "
                          "sleeping between looks (counted in SLEEPS/job)")
                    : cat("sleeps until a job can settle, at most ", args.collect_timeout_us, " us a wait",
                          args.wait_slack_us > 0 ? cat(" (or up to ", args.wait_slack_us, " us more: --wait-slack-us)")
                                                 : std::string()))
            << "; the chunk cache keeps " << 100 * options.keep_free_share
            << "% of the chunks free or coming back through the fence (--keep-free)\n";
  std::cout << "COPY and OVERHEAD: the jobs whose copies were timed, "
            << (options.time_every == 1 ? std::string("every job") : cat("one in ", options.time_every))
            << " (--time-every)\n";
  Table table({"BLOCK", "MIX", "PATH", "GB/s", "OF CEIL", "SETTLE p50 us", "p99", "COPY p50", "OVERHEAD p50", "p99",
               "LANDED p99", "SEEN p99", "IN FLIGHT", "NO JOB", "CPU us/job", "/rank", "SLEEPS/job",
               "RANKS CPU us/job", "REPORTS/s"},
              {Table::Align::kRight, Table::Align::kLeft, Table::Align::kLeft});
  for (const bench::OffloadRow& row : result.rows) {
    const bool ceiling = row.path == bench::OffloadPath::kCopyEngine;
    auto cell = [&](double value) { return ceiling ? std::string("-") : us(value); };
    auto timed_cell = [&](double value) { return row.timed_jobs == 0 ? std::string("-") : cell(value); };
    table.add_row({format_bytes(row.block_bytes), bench::mix_name(row.mix), bench::path_name(row.path),
                   fixed(row.gb_per_second, 2), fixed(100 * row.of_ceiling, 1) + "%", cell(row.settle_p50_us),
                   cell(row.settle_p99_us), timed_cell(row.copy_p50_us), timed_cell(row.overhead_p50_us),
                   timed_cell(row.overhead_p99_us), timed_cell(row.landed_p99_us), timed_cell(row.seen_p99_us),
                   ceiling ? "-" : fixed(row.mean_jobs_in_flight, 2),
                   ceiling ? "-" : fixed(100 * row.no_job_share, 1) + "%",
                   ceiling ? "-" : fixed(row.cpu_us_per_job, 2), ceiling ? "-" : fixed(row.cpu_us_per_job_rank, 2),
                   ceiling ? "-" : fixed(row.sleeps_per_job, 2), ceiling ? "-" : fixed(row.ranks_cpu_us_per_job, 1),
                   ceiling ? "-" : fixed(row.reports_per_second, 0)});
  }
  std::cout << table.render();
  if (args.rank_threads) {
    std::cout << "rank threads by name, all ranks: count, CPU us per job (us per job runnable but waiting for a CPU)\n";
    for (const bench::OffloadRow& row : result.rows) {
      if (row.path == bench::OffloadPath::kCopyEngine) continue;
      std::cout << "  " << format_bytes(row.block_bytes) << " " << bench::mix_name(row.mix) << " "
                << bench::path_name(row.path) << ": " << rank_threads_line(row) << "\n";
    }
  }
  std::cout << "checked after each row: " << result.chunks_checked << " host chunk copies and " << result.slots_checked
            << " GPU slots, every byte what the jobs put there\n";
  return 0;
}

}  // namespace

void add_offload_bench_command(CLI::App& bench, Context& context) {
  auto args = std::make_shared<OffloadArgs>();
  bench::OffloadBenchOptions& o = args->options;
  CLI::App* offload = bench.add_subcommand(
      "offload", "The whole offload path (jobs, reports, quorum, fence) vs the copy engine alone and the engines' way");
  offload->add_option("--tp", o.tp, "Tensor-parallel ranks")->check(CLI::Range(1, 64));
  offload->add_option("--pp", o.pp, "Pipeline stages (odd stages hold half the payload)")->check(CLI::Range(1, 64));
  offload->add_option("--blocks", args->blocks, "Block sizes of even stages, comma-separated (multiples of 8K)")
      ->delimiter(',')
      ->check(size_validator());
  offload->add_option("--mixes", args->mixes, "Rows: mixed, store, load (comma-separated)")->delimiter(',');
  offload->add_option("--backend", o.backend, "auto (GPU when one answers), gpu, host")
      ->check(CLI::IsMember({"auto", "gpu", "host"}));
  offload->add_option("--seconds", o.seconds, "Timed seconds per row")->check(CLI::Range(0.05, 600.0));
  offload->add_option("--jobs-in-flight", o.jobs_in_flight, "Unsettled jobs at most")->check(CLI::Range(1, 256));
  offload->add_option("--chunks-per-job", o.chunks_per_job, "Chunks per job")->check(CLI::Range(1, 64));
  offload->add_option("--blocks-per-chunk", o.blocks_per_chunk, "Blocks per chunk")->check(CLI::Range(1, 1024));
  offload->add_option("--cpu-bytes", args->cpu_bytes, "Host KV over all ranks")->check(size_validator());
  offload->add_option("--keep-free", o.keep_free_share,
                      "Share of the chunks (0 to 0.5) the cache keeps free or on their way back through the fence "
                      "by evicting ahead; at least 2 x jobs in flight x chunks per job")
      ->capture_default_str();
  offload->add_option("--time-every", o.time_every,
                      "Both protocol rows time the GPU copies of one job in this many (timing events around them, "
                      "which slow the copies: COPY and OVERHEAD come from those jobs); 1: every job, as vLLM does")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  offload->add_option("--poll-us", args->poll_us, "The engine way: microseconds between event polls")
      ->check(CLI::Range(1.0, 100000.0));
  offload->add_option("--completion-poll-us", args->completion_poll_us,
                      "hugepin's ranks: microseconds between polls of a job's copy event (0: wait asleep; "
                      "default: --poll-us)")
      ->check(CLI::Range(0.0, 100000.0));
  offload->add_flag("--spin", o.spin,
                    "Both rows' ranks look at their copy events back to back while any is out, instead of "
                    "sleeping between looks (a CPU core per rank while copies are out; --poll-us and "
                    "--completion-poll-us are then not used)");
  offload->add_option("--collect-every-us", args->collect_every_us,
                      "The scheduler looks for settled jobs once every this many microseconds without waiting, "
                      "as an engine does once per step (0, the default: it sleeps until a job can settle)")
      ->check(CLI::Range(0.0, 1000000.0));
  offload->add_option("--collect-timeout-us", args->collect_timeout_us,
                      "When the scheduler sleeps until a job can settle: the longest wait, in microseconds, when "
                      "nothing wakes it, in both protocol rows")
      ->check(CLI::Range(10.0, 1000000.0))
      ->capture_default_str();
  offload->add_option("--wait-slack-us", args->wait_slack_us,
                      "... and how many microseconds late that timeout may end a sleep in which nothing happened "
                      "(timer slack: at a scheduler tick or more the kernel need not reprogram the CPU's timer "
                      "twice a sleep, which a virtual machine charges to the sleeper; 0, the default: the "
                      "thread's own)")
      ->check(CLI::Range(0.0, 1000000.0));
  offload->add_flag("--rank-threads", args->rank_threads,
                    "After the table, each protocol row's rank threads by name: CPU and run-queue wait per job "
                    "(always in --json)");
  offload->add_flag("--json", args->json, "Print JSON");
  offload->callback([&context, args] { context.action = [args] { return run(*args); }; });
}

}  // namespace hugepin::cli
