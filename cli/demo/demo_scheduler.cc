#include "cli/demo/demo_scheduler.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <iostream>
#include <map>
#include <mutex>

#include "bench/stats.h"
#include "cli/demo/demo_worker.h"
#include "cli/engine/channel.h"
#include "cli/engine/kv_stamp.h"
#include "cli/engine/rank_processes.h"
#include "disk/region_spill.h"
#include "session/host_plan.h"
#include "session/scheduler_session.h"

namespace hugepin::demo {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }

struct Job {
  cli::CacheJob cache;
  Clock::time_point dispatched;
};

class Engine {
 public:
  Engine(const DemoConfig& config, const planner::CapacityPlan& plan, int gpus, DemoResult& result)
      : config_(config), result_(result), session_(create(plan, result)), geometry_(session_.geometry()),
        cache_(geometry_.chunk_count(), config.plan.gpu_blocks / geometry_.blocks_per_chunk(), 12345),
        workers_(geometry_.ranks(), [this, gpus](uint32_t rank, int channel) {
          run_worker({&config_, result_.arena, rank, channel, gpus > 0, gpus > 0 ? static_cast<int>(rank % gpus) : 0});
        }) {
    for (uint32_t rank = 0; rank < geometry_.ranks(); ++rank) workers_.spawn(rank);
  }

  // Runs the engine for config.seconds, then drains; false when a rank died and the run stopped.
  bool run() {
    const auto start = Clock::now();
    auto last_step = start;
    auto last_progress = start;
    for (bool killed = false;;) {
      config_.check_interrupted();
      const double elapsed = ms_since(start) / 1000.0;
      const bool running = elapsed < config_.seconds;
      session_.drain(1'000'000);  // wakes when a job may have settled (the report gate)
      settle();
      if (!check_workers()) return stop(start, /*stopped_by_dead_rank=*/true);
      if (!killed && config_.kill_rank >= 0 && elapsed >= config_.kill_after) {
        killed = true;
        workers_.kill(static_cast<uint32_t>(config_.kill_rank));
      }
      if (running && session_.protocol().figures().live_ranks == geometry_.ranks()) dispatch();
      if (ms_since(last_step) >= 5) {
        end_step();
        last_step = Clock::now();
      }
      if (config_.progress && ms_since(last_progress) >= 500) {
        progress(elapsed);
        last_progress = Clock::now();
      }
      if (!running && jobs_.empty()) return stop(start, false);
      if (!running && elapsed > config_.seconds + 30) throw Error("jobs did not settle within 30 s of the end");
    }
  }

  // Checks the host copy of every stored chunk in every rank's region: a thread per rank.
  void verify_all() {
    std::vector<std::future<void>> ranks;
    for (uint32_t rank = 0; rank < geometry_.ranks(); ++rank) {
      ranks.push_back(std::async(std::launch::async, [this, rank] { verify_rank(rank, false); }));
    }
    for (std::future<void>& rank : ranks) rank.get();  // rethrows a rank's failure
  }

 private:
  SchedulerSession create(const planner::CapacityPlan& plan, DemoResult& result) {
    ArenaOptions options;
    options.page_size = config_.plan.page_size;
    SchedulerSessionOptions session;
    session.max_jobs_in_flight = 4 * config_.jobs_in_flight;
    session.keep_arena = config_.keep;
    ArenaCreated created;
    SchedulerSession made = SchedulerSession::create(real_os(), result.arena, plan, options, session, {}, &created);
    result.arena_report = std::move(created.data);
    return made;
  }

  bool stop(Clock::time_point start, bool stopped_by_dead_rank) {
    result_.seconds = ms_since(start) / 1000.0;
    result_.stopped_by_dead_rank = stopped_by_dead_rank;
    if (config_.progress) std::cerr << "\r\033[K";
    session_.publish();  // the running engine's figures, before its workers detach
    send_all(cli::Message{cli::MessageType::kStop});
    workers_.wait_all();
    session_.drain(0);
    result_.figures = session_.protocol().figures();
    return !stopped_by_dead_rank;
  }

  void send_all(const cli::Message& message) {
    for (uint32_t rank = 0; rank < geometry_.ranks(); ++rank) {
      if (session_.protocol().rank_state(rank) != RankLiveness::kLive) continue;
      try {
        cli::send_message(workers_.channel(rank), message);
      } catch (const Error&) {
        // The worker is gone: check_workers() finds it and takes the dead-rank path.
      }
    }
  }

  void settle() {
    ids_.clear();
    session_.take_completed(&ids_);
    for (JobId id : ids_) {
      const Job& job = jobs_.at(id);
      result_.quorum_ms.push_back(ms_since(job.dispatched));
      const bool disk = job.cache.slots.empty();
      (disk ? result_.disk_bytes : result_.bytes_moved) += job.cache.chunks.size() * geometry_.chunk_bytes_all_ranks();
      uint64_t* counts[] = {&result_.loads, &result_.stores, &result_.spills, &result_.restores};
      ++*counts[static_cast<int>(job.cache.op)];
      if (job.cache.op == cli::CacheOp::kLoad) result_.loads_checked += geometry_.ranks();
      cache_.completed(job.cache);
      jobs_.erase(id);
    }
    failed_.clear();
    session_.take_failed(&failed_);
    for (FailedJob& failure : failed_) {
      if (auto it = jobs_.find(failure.job); it != jobs_.end()) {
        for (ChunkId chunk : cache_.failed(it->second.cache, session_.protocol().current_epoch())) session_.retire(chunk);
        jobs_.erase(it);
      }
      result_.failures.push_back(std::move(failure));
    }
    cache_.epoch_released(session_.protocol().all_rank_epoch());
    reusable_.clear();
    session_.take_reusable(&reusable_);
    for (ChunkId chunk : reusable_) result_.fence_wait_ms.push_back(cache_.reusable(chunk));
  }

  // Stores and loads, and with a disk tier spills and restores between them.
  void dispatch() {
    static constexpr cli::CacheOp kCycle[] = {cli::CacheOp::kStore, cli::CacheOp::kLoad, cli::CacheOp::kSpill,
                                        cli::CacheOp::kStore, cli::CacheOp::kLoad, cli::CacheOp::kRestore};
    for (uint32_t attempts = 0; jobs_.size() < config_.jobs_in_flight && attempts < 6; ++attempts) {
      cli::CacheOp op = kCycle[op_counter_++ % (config_.spill_dir.empty() ? 2 : std::size(kCycle))];
      if (op == cli::CacheOp::kLoad && cache_.stored() < config_.chunks_per_job) op = cli::CacheOp::kStore;
      std::optional<cli::CacheJob> job = cache_.begin(op, config_.chunks_per_job);
      if (!job) continue;
      const JobId id = session_.dispatch(cli::job_kind(op), job->chunks);
      send_all(cli::job_message(id, *job, geometry_.blocks_per_chunk()));
      jobs_.emplace(id, Job{std::move(*job), Clock::now()});
    }
    // Evicts idle stored chunks when few are free, as an engine's cache does.
    for (ChunkId chunk : cache_.evict(2 * config_.chunks_per_job)) session_.retire(chunk);
  }

  void end_step() {
    const Epoch closed = session_.protocol().current_epoch();
    session_.begin_epoch();
    send_all(cli::Message{cli::MessageType::kEndStep, cli::CacheOp::kLoad, 0, closed});
  }

  // Reaps dead workers: their rank takes the dead-rank path, and with --restart a new process.
  bool check_workers() {
    for (uint32_t rank = 0; rank < geometry_.ranks(); ++rank) {
      const pid_t pid = workers_.pid(rank);
      const std::optional<int> status = workers_.reap(rank);
      if (!status) continue;
      const RankGeometry& r = geometry_.rank(rank);
      result_.events.push_back(cat("rank ", rank, " (tp ", r.tp_rank, ", pp ", r.pp_rank, "): process ", pid, " ",
                                   cli::RankProcesses::describe(*status)));
      session_.rank_process_gone(rank);  // reaped: nothing of it can still copy
      exits_.clear();
      session_.take_rank_exits(&exits_);
      for (const RankExit& exit : exits_) {
        result_.events.push_back(cat("rank ", exit.rank, ": ", exit.jobs_failed, " jobs can no longer reach quorum; "
                                     "their chunks were quarantined until the process was gone, then released"));
      }
      settle();
      if (!config_.restart) return false;
      workers_.spawn(rank);
      result_.events.push_back(cat("rank ", rank, ": restarted as pid ", workers_.pid(rank)));
      verify_rank(rank, /*after_restart=*/true);
    }
    return true;
  }

  // Checks rank `rank`'s host copy of every stored chunk. Reads only the chunk table, so several
  // ranks can be checked at once.
  void verify_rank(uint32_t rank, bool after_restart) {
    MappedRegion region = open_region(real_os(), result_.arena, rank, /*writable=*/false);
    uint64_t checked = 0;
    for (ChunkId chunk = 0; chunk < geometry_.chunk_count(); ++chunk) {
      const std::optional<uint64_t> version = cache_.stored_version(chunk);
      for (size_t s = 0; version && s < geometry_.rank(rank).segments.size(); ++s) {
        const std::span<const std::byte> blocks(region.data() + geometry_.host_block_offset(rank, s, chunk, 0),
                                                geometry_.chunk_segment_bytes(rank, s));
        if (auto b = cli::wrong_block(blocks, geometry_.rank(rank).segments[s].bytes_per_block, {chunk, *version, rank, s})) {
          throw Error(cat("rank ", rank, ": chunk ", chunk, " (version ", *version, ") segment ", s, " block ", *b, " in ",
                          region.path(), " is not what its store wrote"));
        }
      }
      checked += version.has_value();
    }
    std::lock_guard lock(verified_);
    result_.chunks_verified += checked;
    result_.bytes_verified += checked * geometry_.chunk_bytes(rank);
    if (after_restart) {
      result_.events.push_back(cat("rank ", rank, ": its region survived its process: ", checked,
                                   " stored chunks checked, all intact"));
    }
  }

  void progress(double elapsed) {
    const SchedulerFigures f = session_.protocol().figures();
    std::fprintf(stderr, "\r\033[K  %.1fs  jobs %llu done, %u waiting  chunks %zu stored, %zu free  %.2f GB/s  "
                 "quorum p50 %.2f ms", elapsed, static_cast<unsigned long long>(f.jobs_completed), f.jobs_waiting_quorum,
                 cache_.stored(), cache_.free(), elapsed > 0 ? static_cast<double>(result_.bytes_moved) / elapsed / 1e9 : 0,
                 bench::percentile(result_.quorum_ms, 50));
    std::fflush(stderr);
  }

  const DemoConfig& config_;
  DemoResult& result_;
  SchedulerSession session_;
  const ChunkGeometry& geometry_;
  cli::ChunkCache cache_;
  cli::RankProcesses workers_;
  std::map<JobId, Job> jobs_;
  std::vector<JobId> ids_;
  std::vector<FailedJob> failed_;
  std::vector<ChunkId> reusable_;
  std::vector<RankExit> exits_;
  std::mutex verified_;
  uint64_t op_counter_ = 0;
};

}  // namespace

DemoResult run_demo(const DemoConfig& config) {
  DemoResult result;
  const int gpus = cli::gpus_for_backend(config.backend);
  result.gpu = gpus > 0;
  result.arena = cat("demo-", getpid());
  const planner::PlanInput input = cli::mini_plan_input(config.plan);
  const planner::CapacityPlan plan = planner::make_plan(input, read_host_info(real_os(), input));
  result.chunk_count = plan.chunk_count;
  result.blocks_per_chunk = plan.blocks_per_chunk;
  struct SpillFiles {  // the workers' spill files, whatever happens to them
    std::string prefix;
    ~SpillFiles() { RegionSpill::remove_files(prefix); }
  } spill_files{config.spill_dir.empty() ? "" : cat(config.spill_dir, "/", result.arena, ".rank")};
  Engine engine(config, plan, gpus, result);
  if (engine.run()) engine.verify_all();
  return result;
}

}  // namespace hugepin::demo
