// hugepin demo: the main job on an embedded default.
//
// A TP x PP engine in miniature: an arena from a built-in plan with unequal pipeline stages, one
// process per rank copying real data (through CUDA when a GPU answers, host memcpy otherwise),
// the scheduler running copy pins, quorum and fence over the rings, every byte checked, and the
// arena removed. `hugepin inspect` on another terminal shows it live.
#include <unistd.h>

#include <iostream>

#include "base/size.h"
#include "base/table.h"
#include "bench/stats.h"
#include "cli/arena_view.h"
#include "cli/command.h"
#include "cli/interruption.h"
#include "cli/demo/demo_scheduler.h"

namespace hugepin::cli {
namespace {

struct DemoArgs {
  demo::DemoConfig config;
  std::string cpu_bytes = "512M";
  std::string page_size = "auto";
  bool json = false;
};

std::string ms(double value) { return fixed(value, 2); }

Json result_json(const demo::DemoResult& r) {
  Json failures = Json::array();
  for (const FailedJob& f : r.failures) failures.push_back({{"job", f.job}, {"rank", f.rank}, {"message", f.message}});
  return {{"arena", r.arena},
          {"backend", r.gpu ? "gpu" : "host"},
          {"chunks", r.chunk_count},
          {"blocks_per_chunk", r.blocks_per_chunk},
          {"seconds", r.seconds},
          {"stores", r.stores},
          {"loads", r.loads},
          {"spills", r.spills},
          {"restores", r.restores},
          {"disk_bytes", r.disk_bytes},
          {"bytes_moved", r.bytes_moved},
          {"gb_per_second", r.seconds > 0 ? static_cast<double>(r.bytes_moved) / r.seconds / 1e9 : 0},
          {"quorum_ms", {{"p50", bench::percentile(r.quorum_ms, 50)}, {"p99", bench::percentile(r.quorum_ms, 99)}}},
          {"fence_wait_ms", {{"p50", bench::percentile(r.fence_wait_ms, 50)}, {"max", bench::percentile(r.fence_wait_ms, 100)}}},
          {"retired_chunks", r.fence_wait_ms.size()},
          {"reports_applied", r.figures.reports_applied},
          {"reports_rejected", r.figures.reports_rejected},
          {"loads_checked", r.loads_checked},
          {"chunks_verified", r.chunks_verified},
          {"bytes_verified", r.bytes_verified},
          {"failures", failures},
          {"stopped_by_dead_rank", r.stopped_by_dead_rank},
          {"events", r.events}};
}

void print_result(const demo::DemoResult& r) {
  Table table({"JOBS", "STORES", "LOADS", "MOVED", "GB/s", "QUORUM p50 ms", "p99 ms", "RETIRED", "FENCE WAIT p50 ms",
               "max ms", "REPORTS", "REJECTED"});
  table.add_row({std::to_string(r.stores + r.loads), std::to_string(r.stores), std::to_string(r.loads),
                 format_bytes(r.bytes_moved),
                 fixed(r.seconds > 0 ? static_cast<double>(r.bytes_moved) / r.seconds / 1e9 : 0, 2),
                 ms(bench::percentile(r.quorum_ms, 50)), ms(bench::percentile(r.quorum_ms, 99)),
                 std::to_string(r.fence_wait_ms.size()), ms(bench::percentile(r.fence_wait_ms, 50)),
                 ms(bench::percentile(r.fence_wait_ms, 100)), std::to_string(r.figures.reports_applied),
                 std::to_string(r.figures.reports_rejected)});
  std::cout << table.render();
  if (r.spills + r.restores > 0) {
    std::cout << "disk tier: " << r.spills << " spill and " << r.restores << " restore jobs, "
              << format_bytes(r.disk_bytes) << ", pinned and fenced like copies\n";
  }
}

int run(const DemoArgs& args) {
  demo::DemoConfig config = args.config;
  config.plan.cpu_bytes = size_value(args.cpu_bytes);
  config.plan.page_size = page_size_value(args.page_size);
  config.progress = !args.json && isatty(STDERR_FILENO) != 0;
  Interruption interruption;  // Ctrl-C ends the run cleanly: workers stopped, arena removed
  config.check_interrupted = [&interruption] { interruption.check("running the demo"); };
  if (config.kill_rank >= static_cast<int>(config.plan.tp * config.plan.pp)) {
    throw UsageError(cat("--kill-rank ", config.kill_rank, " is not a rank of TP ", config.plan.tp, " x PP ",
                         config.plan.pp));
  }
  if (!args.json) {
    std::cout << "hugepin demo: TP " << config.plan.tp << " x PP " << config.plan.pp << ", "
              << format_bytes(config.plan.cpu_bytes)
              << " of host KV, " << config.seconds << " s" << std::endl;
  }
  demo::DemoResult result = demo::run_demo(config);
  // A death with --restart is recovered from (and checked); without it the run ends there.
  const int status = result.stopped_by_dead_rank ? 1 : 0;
  if (args.json) {
    print_json(result_json(result));
    return status;
  }
  std::cout << "arena '" << result.arena << "': " << result.chunk_count << " chunks of " << result.blocks_per_chunk
            << " blocks shared by all ranks; copies by " << (result.gpu ? "CUDA" : "host memcpy (no GPU)") << "\n"
            << arena_report_table(result.arena_report) << "\n";
  for (const std::string& event : result.events) std::cout << event << "\n";
  for (const FailedJob& failure : result.failures) std::cout << "failed: " << failure.message << "\n";
  print_result(result);
  if (result.stopped_by_dead_rank) {
    std::cout << "a rank died: the jobs it had not reported failed, the run stopped, and no chunk was reused while "
                 "any process could still touch it (rerun with --restart to replace it)\n";
    return 1;
  }
  std::cout << "checked: every load on every rank block by block (" << result.loads_checked
            << " rank-loads), and every stored chunk in every rank's region at the end (" << result.chunks_verified
            << " chunk copies, " << format_bytes(result.bytes_verified) << "): all correct\n";
  std::cout << (config.keep ? cat("kept arena '", result.arena, "' (hugepin arena destroy ", result.arena, ")\n")
                            : cat("removed arena '", result.arena, "'\n"));
  return status;
}

}  // namespace

void add_demo_command(CLI::App& app, Context& context) {
  auto args = std::make_shared<DemoArgs>();
  demo::DemoConfig& c = args->config;
  CLI::App* demo = app.add_subcommand("demo", "Run a TP x PP offload engine in miniature on an arena, checking every byte");
  demo->add_option("--tp", c.plan.tp, "Tensor-parallel ranks")->check(CLI::Range(1, 64));
  demo->add_option("--pp", c.plan.pp, "Pipeline stages (odd stages hold half the payload of even ones)")
      ->check(CLI::Range(1, 64));
  demo->add_option("--cpu-bytes", args->cpu_bytes, "Host KV budget over all ranks")->check(size_validator());
  demo->add_option("--blocks-per-chunk", c.plan.blocks_per_chunk, "Blocks per chunk")->check(CLI::Range(1, 1024));
  demo->add_option("--gpu-blocks", c.plan.gpu_blocks, "Each rank's GPU KV cache in blocks")->check(CLI::Range(16, 1 << 20));
  demo->add_option("--chunks-per-job", c.chunks_per_job, "Chunks per copy job")->check(CLI::Range(1, 64));
  demo->add_option("--jobs-in-flight", c.jobs_in_flight, "Unsettled jobs at most")->check(CLI::Range(1, 256));
  demo->add_option("--seconds", c.seconds, "How long the engine runs")->check(finite_range(0.1, 3600.0));
  demo->add_option("--pagesize", args->page_size, "Arena page size")->check(page_size_validator(true));
  demo->add_option("--backend", c.backend, "Copies: auto (CUDA when a GPU answers), gpu, host")
      ->check(CLI::IsMember({"auto", "gpu", "host"}));
  CLI::Option* kill_rank =
      demo->add_option("--kill-rank", c.kill_rank, "SIGKILL this rank's process during the run (the dead-rank path)")
          ->check(CLI::NonNegativeNumber);
  // Without --kill-rank they would do nothing: said, not ignored.
  demo->add_option("--kill-after", c.kill_after, "Seconds into the run for --kill-rank")
      ->check(finite_range(0.0, 3600.0))
      ->needs(kill_rank);
  demo->add_flag("--restart", c.restart, "Replace a dead rank's process and go on")->needs(kill_rank);
  demo->add_flag("--keep", c.keep, "Keep the arena afterwards");
  demo->add_option("--spill-dir", c.spill_dir, "Also spill chunks to files here and restore them (the disk tier)")
      ->check(CLI::ExistingDirectory);
  demo->add_flag("--json", args->json, "Print the result as JSON (docs/demo.md)");
  demo->callback([&context, args] { context.action = [args] { return run(*args); }; });
}

}  // namespace hugepin::cli
