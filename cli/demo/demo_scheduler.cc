#include "cli/demo/demo_scheduler.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <thread>

#include "base/error.h"
#include "base/pattern.h"
#include "base/size.h"
#include "bench/stats.h"
#include "cli/demo/demo_channel.h"
#include "cli/demo/demo_worker.h"
#include "cli/demo/kv_model.h"
#include "cli/plan_arena.h"
#include "dma/gpu_runtime.h"
#include "hugemem/pool.h"
#include "ipc/arena_control.h"
#include "ipc/publish_figures.h"

namespace hugepin::demo {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// CUDA must not be initialized in a process that forks workers: a child counts the GPUs.
int gpus_seen_by_a_child(const DemoConfig& config) {
  pid_t child = fork();
  if (child < 0) throw_errno("fork", errno);
  if (child == 0) {
    int count = 0;
    try {
      if (demo_uses_gpu(config)) cuda_runtime()->device_count(&count);
    } catch (const Error& error) {
      std::cerr << "hugepin demo: " << error.what() << "\n";
      _exit(255);
    }
    _exit(std::min(count, 64));
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) == 255) throw Error("--backend gpu: no usable GPU");
  return WEXITSTATUS(status);
}

enum class ChunkState { kFree, kStoring, kStored, kRetired };

struct Job {
  DemoOp op;
  JobKind kind;
  std::vector<ChunkCopy> chunks;
  std::vector<uint64_t> slots;
  Clock::time_point dispatched;
};

class Engine {
 public:
  Engine(const DemoConfig& config, const planner::CapacityPlan& plan, std::string arena, bool gpu, DemoResult& result)
      : config_(config),
        plan_(plan),
        arena_(std::move(arena)),
        gpu_(gpu),
        result_(result),
        control_(ArenaControl::adopt(real_os(), arena_)),
        scheduler_({plan.tp, plan.pp, static_cast<uint32_t>(plan.chunk_count), 4 * config.jobs_in_flight}),
        states_(plan.chunk_count, ChunkState::kFree),
        versions_(plan.chunk_count, 0),
        busy_(plan.chunk_count, 0),
        exclusive_(plan.chunk_count, false),
        on_disk_(plan.chunk_count, 0),
        retired_at_(plan.chunk_count),
        random_(12345) {
    for (ChunkId c = 0; c < plan.chunk_count; ++c) free_.push_back(c);
    for (uint64_t s = 0; s < plan.ranks.front().num_blocks / plan.blocks_per_chunk; ++s) slots_.push_back(s);
    workers_.resize(plan.ranks.size());
  }

  ~Engine() {
    for (Worker& worker : workers_) {
      if (worker.pid > 0) {
        kill(worker.pid, SIGKILL);
        waitpid(worker.pid, nullptr, 0);
      }
      if (worker.channel >= 0) close(worker.channel);
    }
  }

  void start_workers() {
    for (uint32_t rank = 0; rank < workers_.size(); ++rank) spawn(rank);
  }

  // Runs the engine loop for config.seconds, then drains. Returns false when a rank died and
  // the run stopped there.
  bool run() {
    const auto start = Clock::now();
    auto last_step = start;
    auto last_publish = start;
    auto last_progress = start;
    bool killed = false;
    bool alive = true;
    while (alive) {
      const double elapsed = ms_since(start) / 1000.0;
      const bool running = elapsed < config_.seconds;
      drain_reports();
      settle();
      alive = check_workers();
      if (!alive) {
        result_.stopped_by_dead_rank = true;
        break;
      }
      if (!killed && config_.kill_rank >= 0 && elapsed >= config_.kill_after) {
        killed = true;
        kill(workers_.at(config_.kill_rank).pid, SIGKILL);
      }
      if (running && all_live()) dispatch();
      evict();
      if (ms_since(last_step) >= 5) {
        end_step();
        last_step = Clock::now();
      }
      if (ms_since(last_publish) >= 100) {
        control_.publish(published_figures(scheduler_.figures()));
        last_publish = Clock::now();
      }
      if (config_.progress && ms_since(last_progress) >= 500) {
        progress(elapsed);
        last_progress = Clock::now();
      }
      if (!running && jobs_.empty()) break;
      if (!running && elapsed > config_.seconds + 30) throw Error("jobs did not settle within 30 s of the end");
      control_.wait_for_reports(1'000'000);
    }
    result_.seconds = ms_since(start) / 1000.0;
    if (config_.progress) std::cerr << "\r\033[K";
    // The last figures an inspector sees are those of the running engine, not of its detached
    // workers (a detach counts as a dead rank in the scheduler's figures).
    control_.publish(published_figures(scheduler_.figures()));
    stop_workers();
    drain_reports();
    result_.figures = scheduler_.figures();
    return alive;
  }

  // The host copies of every stored chunk, on every rank, byte by byte: a thread per rank.
  void verify_all() {
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> failures(plan_.ranks.size());
    std::vector<Verified> verified(plan_.ranks.size());
    for (uint32_t rank = 0; rank < plan_.ranks.size(); ++rank) {
      threads.emplace_back([&, rank] {
        try {
          verified[rank] = verify_region(rank);
        } catch (...) {
          failures[rank] = std::current_exception();
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (const std::exception_ptr& failure : failures) {
      if (failure) std::rethrow_exception(failure);
    }
    for (const Verified& v : verified) {
      result_.chunks_verified += v.chunks;
      result_.bytes_verified += v.bytes;
    }
  }

 private:
  struct Worker {
    pid_t pid = -1;
    int channel = -1;
  };

  void spawn(uint32_t rank) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) throw_errno("socketpair", errno);
    std::cout.flush();
    std::cerr.flush();
    pid_t pid = fork();
    if (pid < 0) throw_errno("fork", errno);
    if (pid == 0) {
      close(fds[0]);
      for (Worker& other : workers_) {
        if (other.channel >= 0) close(other.channel);
      }
      WorkerSetup setup;
      setup.config = &config_;
      setup.plan = &plan_;
      setup.arena = arena_;
      setup.rank = rank;
      setup.channel_fd = fds[1];
      setup.gpu = gpu_;
      setup.device = gpu_devices_ > 0 ? static_cast<int>(rank % gpu_devices_) : 0;
      run_worker(setup);
    }
    close(fds[1]);
    if (workers_[rank].channel >= 0) close(workers_[rank].channel);
    workers_[rank] = {pid, fds[0]};
  }

 public:
  void set_gpu_devices(int devices) { gpu_devices_ = devices; }

 private:
  bool all_live() const {
    for (uint32_t r = 0; r < scheduler_.ranks(); ++r) {
      if (scheduler_.rank_state(r) != RankLiveness::kLive) return false;
    }
    return true;
  }

  void send_all(const Message& message) {
    for (uint32_t rank = 0; rank < workers_.size(); ++rank) {
      if (scheduler_.rank_state(rank) != RankLiveness::kLive) continue;
      try {
        send_message(workers_[rank].channel, message);
      } catch (const Error&) {
        // The worker is gone: check_workers() finds it and takes the dead-rank path.
      }
    }
  }

  void drain_reports() {
    Report reports[256];
    for (uint32_t rank = 0; rank < workers_.size(); ++rank) {
      for (size_t n; (n = control_.consume(rank, reports)) > 0;) {
        for (size_t i = 0; i < n; ++i) scheduler_.apply(reports[i]);
      }
    }
  }

  uint64_t job_bytes(const Job& job) const {
    return job.chunks.size() * plan_.blocks_per_chunk * plan_.payload_bytes_per_block;
  }

  void settle() {
    completed_.clear();
    scheduler_.take_completed(&completed_);
    for (JobId id : completed_) {
      auto it = jobs_.find(id);
      if (it == jobs_.end()) continue;
      Job& job = it->second;
      result_.quorum_ms.push_back(ms_since(job.dispatched));
      const bool disk = job.op == DemoOp::kSpill || job.op == DemoOp::kRestore;
      (disk ? result_.disk_bytes : result_.bytes_moved) += job_bytes(job);
      for (const ChunkCopy& copy : job.chunks) {
        switch (job.op) {
          case DemoOp::kStore:
            states_[copy.chunk] = ChunkState::kStored;
            versions_[copy.chunk] = copy.version;
            stored_.push_back(static_cast<ChunkId>(copy.chunk));
            break;
          case DemoOp::kSpill:
            on_disk_[copy.chunk] = copy.version;
            --busy_[copy.chunk];
            break;
          case DemoOp::kRestore:
            exclusive_[copy.chunk] = false;
            --busy_[copy.chunk];
            break;
          case DemoOp::kLoad:
            --busy_[copy.chunk];
            break;
        }
      }
      switch (job.op) {
        case DemoOp::kStore: ++result_.stores; break;
        case DemoOp::kSpill: ++result_.spills; break;
        case DemoOp::kRestore: ++result_.restores; break;
        case DemoOp::kLoad:
          ++result_.loads;
          result_.loads_checked += workers_.size();
          break;
      }
      for (uint64_t slot : job.slots) slots_.push_back(slot);
      jobs_.erase(it);
    }
    failed_.clear();
    scheduler_.take_failed(&failed_);
    for (FailedJob& failure : failed_) {
      auto it = jobs_.find(failure.job);
      if (it != jobs_.end()) {
        // A failed store leaves its chunks half written: give them up. The GPU slots of a failed
        // job wait until every live rank has released the current epoch: their copies of it,
        // sent before that epoch closed, are over by then.
        held_slots_.push_back({scheduler_.current_epoch(), it->second.slots});
        for (const ChunkCopy& copy : it->second.chunks) {
          const DemoOp op = it->second.op;
          if (op != DemoOp::kStore) --busy_[copy.chunk];
          if (op == DemoOp::kRestore) exclusive_[copy.chunk] = false;
          // A failed store or restore leaves the host copy half written.
          if (op == DemoOp::kStore || op == DemoOp::kRestore) {
            if (op == DemoOp::kRestore) std::erase(stored_, static_cast<ChunkId>(copy.chunk));
            retire(static_cast<ChunkId>(copy.chunk));
          }
        }
        jobs_.erase(it);
      }
      result_.failures.push_back(std::move(failure));
    }
    while (!held_slots_.empty() && held_slots_.front().first <= scheduler_.all_rank_epoch()) {
      for (uint64_t slot : held_slots_.front().second) slots_.push_back(slot);
      held_slots_.pop_front();
    }
    reusable_.clear();
    scheduler_.take_reusable(&reusable_);
    for (ChunkId chunk : reusable_) {
      result_.fence_wait_ms.push_back(ms_since(retired_at_[chunk]));
      states_[chunk] = ChunkState::kFree;
      free_.push_back(chunk);
    }
  }

  void retire(ChunkId chunk) {
    states_[chunk] = ChunkState::kRetired;
    retired_at_[chunk] = Clock::now();
    scheduler_.retire(chunk);
  }

  // The next job's op: stores and loads, and with a disk tier spills and restores between them.
  DemoOp next_op() {
    static constexpr DemoOp kCycle[] = {DemoOp::kStore, DemoOp::kLoad,  DemoOp::kSpill,
                                        DemoOp::kStore, DemoOp::kLoad, DemoOp::kRestore};
    const size_t cycle = config_.spill_dir.empty() ? 2 : std::size(kCycle);
    return kCycle[op_counter_++ % cycle];
  }

  // Up to `count` stored chunks that `op` may take now: loads and spills read (no restore may be
  // writing them), a restore writes (nothing may be reading them, and the disk must hold the
  // version the host holds).
  std::vector<ChunkId> pick_stored(DemoOp op, uint32_t count) {
    std::shuffle(stored_.begin(), stored_.end(), random_);
    std::vector<ChunkId> picked;
    for (ChunkId chunk : stored_) {
      if (picked.size() == count) break;
      bool ok = !exclusive_[chunk];
      if (op == DemoOp::kSpill) ok = ok && on_disk_[chunk] != versions_[chunk];
      if (op == DemoOp::kRestore) ok = ok && busy_[chunk] == 0 && on_disk_[chunk] == versions_[chunk];
      if (ok) picked.push_back(chunk);
    }
    return picked;
  }

  void dispatch() {
    const uint32_t per_job = config_.chunks_per_job;
    for (uint32_t attempts = 0; jobs_.size() < config_.jobs_in_flight && attempts < 6; ++attempts) {
      DemoOp op = next_op();
      if (op == DemoOp::kLoad && stored_.size() < per_job) op = DemoOp::kStore;
      Job job;
      job.op = op;
      job.kind = op == DemoOp::kStore || op == DemoOp::kRestore ? JobKind::kStore : JobKind::kLoad;
      std::vector<ChunkId> chunks;
      if (op == DemoOp::kStore) {
        if (free_.size() < per_job || slots_.size() < per_job) continue;
        for (uint32_t i = 0; i < per_job; ++i) {
          ChunkId chunk = free_.front();
          free_.pop_front();
          states_[chunk] = ChunkState::kStoring;
          chunks.push_back(chunk);
          job.chunks.push_back({chunk, 0, ++version_});
        }
      } else {
        if (op == DemoOp::kLoad && slots_.size() < per_job) continue;
        chunks = pick_stored(op, per_job);
        if (chunks.size() < (op == DemoOp::kLoad ? per_job : 1)) continue;
        for (ChunkId chunk : chunks) {
          ++busy_[chunk];
          if (op == DemoOp::kRestore) exclusive_[chunk] = true;
          job.chunks.push_back({chunk, 0, versions_[chunk]});
        }
      }
      // Stores and loads move blocks through GPU slots; the disk tier does not.
      if (op == DemoOp::kStore || op == DemoOp::kLoad) {
        for (ChunkCopy& copy : job.chunks) {
          job.slots.push_back(slots_.front());
          copy.gpu_first_block = slots_.front() * plan_.blocks_per_chunk;
          slots_.pop_front();
        }
      }
      JobId id = scheduler_.dispatch(job.kind, chunks);
      job.dispatched = Clock::now();
      Message message{MessageType::kJob, static_cast<uint32_t>(op), id, 0, job.chunks};
      jobs_.emplace(id, std::move(job));
      send_all(message);
    }
  }

  // Evicts the oldest idle stored chunks when few are free, as an engine's cache does.
  void evict() {
    const size_t want_free = 2 * config_.chunks_per_job;
    while (free_.size() < want_free) {
      auto it = std::find_if(stored_.begin(), stored_.end(), [&](ChunkId c) { return busy_[c] == 0; });
      if (it == stored_.end()) return;
      ChunkId chunk = *it;
      stored_.erase(it);
      retire(chunk);
      // Retired chunks come back through the fence; count them as coming so eviction stops.
      if (std::count(states_.begin(), states_.end(), ChunkState::kRetired) >= static_cast<long>(want_free)) return;
    }
  }

  void end_step() {
    Epoch closed = scheduler_.current_epoch();
    scheduler_.begin_epoch();
    send_all(Message{MessageType::kEndStep, 0, 0, closed, {}});
  }

  bool check_workers() {
    for (uint32_t rank = 0; rank < workers_.size(); ++rank) {
      if (workers_[rank].pid <= 0) continue;
      int status = 0;
      pid_t pid = waitpid(workers_[rank].pid, &status, WNOHANG);
      if (pid != workers_[rank].pid) continue;
      rank_died(rank, status);
      if (!config_.restart) return false;
      spawn(rank);
      result_.events.push_back(cat("rank ", rank, ": restarted as pid ", workers_[rank].pid));
      verify_rank(rank, /*after_restart=*/true);
    }
    return true;
  }

  void rank_died(uint32_t rank, int status) {
    const planner::RankPlan& r = plan_.ranks[rank];
    std::string how = WIFSIGNALED(status) ? cat("killed by signal ", WTERMSIG(status))
                                          : cat("exited with status ", WEXITSTATUS(status));
    result_.events.push_back(
        cat("rank ", rank, " (tp ", r.tp_rank, ", pp ", r.pp_rank, "): process ", workers_[rank].pid, " ", how));
    workers_[rank].pid = -1;
    size_t failed = scheduler_.rank_unresponsive(rank);
    // waitpid reaped it: the process is gone, nothing of it can still copy.
    scheduler_.rank_exited(rank);
    control_.mark_dead_if_gone(rank);
    result_.events.push_back(cat("rank ", rank, ": ", failed, " jobs can no longer reach quorum; their chunks were "
                                 "quarantined until the process was gone, then released"));
    settle();
  }

  struct Verified {
    uint64_t chunks = 0;
    uint64_t bytes = 0;
  };

  // Checks rank `rank`'s host copy of every stored chunk. Reads only this engine's chunk table,
  // so several ranks can be checked at once.
  Verified verify_region(uint32_t rank) const {
    MappedRegion region = open_region(real_os(), arena_, rank, /*writable=*/false);
    RankShape shape = rank_shape(plan_.ranks[rank], plan_.chunk_count, plan_.blocks_per_chunk);
    Verified verified;
    for (ChunkId chunk = 0; chunk < plan_.chunk_count; ++chunk) {
      if (states_[chunk] != ChunkState::kStored) continue;
      for (size_t s = 0; s < shape.segments.size(); ++s) {
        const SegmentShape& segment = shape.segments[s];
        for (uint64_t b = 0; b < plan_.blocks_per_chunk; ++b) {
          const std::byte* block = region.data() + segment.host_offset +
                                   (chunk * plan_.blocks_per_chunk + b) * segment.bytes_per_block;
          if (find_pattern_mismatch(block, segment.bytes_per_block, block_seed(chunk, versions_[chunk], rank, s, b))) {
            throw Error(cat("rank ", rank, ": chunk ", chunk, " (version ", versions_[chunk], ") segment ", s,
                            " block ", b, " in ", region.path(), " is not what its store wrote"));
          }
          verified.bytes += segment.bytes_per_block;
        }
      }
      ++verified.chunks;
    }
    return verified;
  }

  void verify_rank(uint32_t rank, bool after_restart) {
    Verified verified = verify_region(rank);
    result_.chunks_verified += verified.chunks;
    result_.bytes_verified += verified.bytes;
    if (after_restart) {
      result_.events.push_back(cat("rank ", rank, ": its region survived its process: ", verified.chunks,
                                   " stored chunks checked, all intact"));
    }
  }

  void stop_workers() {
    send_all(Message{MessageType::kStop, 0, 0, 0, {}});
    for (uint32_t rank = 0; rank < workers_.size(); ++rank) {
      if (workers_[rank].pid <= 0) continue;
      int status = 0;
      waitpid(workers_[rank].pid, &status, 0);
      workers_[rank].pid = -1;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        throw Error(cat("rank ", rank, "'s worker failed (see its message above)"));
      }
    }
  }

  void progress(double elapsed) {
    double gbps = elapsed > 0 ? static_cast<double>(result_.bytes_moved) / elapsed / 1e9 : 0;
    SchedulerFigures f = scheduler_.figures();
    std::fprintf(stderr, "\r\033[K  %.1fs  jobs %llu done, %u waiting  chunks %zu stored, %zu free  %.2f GB/s  "
                 "quorum p50 %.2f ms",
                 elapsed, static_cast<unsigned long long>(f.jobs_completed), f.jobs_waiting, stored_.size(),
                 free_.size(), gbps, bench::percentile(result_.quorum_ms, 50));
    std::fflush(stderr);
  }

  const DemoConfig& config_;
  const planner::CapacityPlan& plan_;
  std::string arena_;
  bool gpu_;
  int gpu_devices_ = 0;
  DemoResult& result_;
  ArenaControl control_;
  OffloadScheduler scheduler_;
  std::vector<Worker> workers_;
  std::vector<ChunkState> states_;
  std::vector<uint64_t> versions_;
  std::vector<uint32_t> busy_;       // jobs reading the chunk's host copy (loads, spills)
  std::vector<bool> exclusive_;      // a restore is writing the chunk's host copy
  std::vector<uint64_t> on_disk_;    // the version spilled to disk (0: none)
  std::vector<Clock::time_point> retired_at_;
  std::deque<ChunkId> free_;
  std::vector<ChunkId> stored_;
  std::deque<uint64_t> slots_;
  std::deque<std::pair<Epoch, std::vector<uint64_t>>> held_slots_;  // of failed jobs, until released
  std::map<JobId, Job> jobs_;
  std::vector<JobId> completed_;
  std::vector<FailedJob> failed_;
  std::vector<ChunkId> reusable_;
  uint64_t version_ = 0;
  uint64_t op_counter_ = 0;
  std::mt19937_64 random_;
};

}  // namespace

DemoResult run_demo(const DemoConfig& config) {
  DemoResult result;
  const int gpus = config.backend == "host" ? 0 : gpus_seen_by_a_child(config);
  result.gpu = gpus > 0;
  planner::HostInfo host;
  host.pool = read_pool(real_os());
  planner::CapacityPlan plan = planner::make_plan(demo_plan_input(config), host);
  cli::PlannedArena planned = cli::planned_arena(plan);
  result.arena = cat("demo-", getpid());
  result.chunk_count = plan.chunk_count;
  result.blocks_per_chunk = plan.blocks_per_chunk;
  ArenaOptions options;
  options.page_size = config.page_size;
  ArenaCreated created = create_arena_with_control(real_os(), result.arena, planned.layout, options);
  result.arena_report = created.data;
  struct Cleanup {
    std::string name;
    bool keep;
    ~Cleanup() {
      if (keep) return;
      try {
        destroy_arena_with_control(real_os(), name);
      } catch (const std::exception& error) {
        std::cerr << "hugepin demo: cleanup: " << error.what() << "\n";
      }
    }
  } cleanup{result.arena, config.keep};

  struct SpillFiles {
    std::string prefix;
    ~SpillFiles() {
      if (prefix.empty()) return;
      std::error_code ignored;
      std::filesystem::path dir = std::filesystem::path(prefix).parent_path();
      for (const auto& entry : std::filesystem::directory_iterator(dir, ignored)) {
        if (entry.path().string().rfind(prefix, 0) == 0) std::filesystem::remove(entry.path(), ignored);
      }
    }
  } spill_files{config.spill_dir.empty() ? "" : cat(config.spill_dir, "/", result.arena, ".rank")};

  Engine engine(config, plan, result.arena, result.gpu, result);
  engine.set_gpu_devices(result.gpu ? gpus : 0);
  engine.start_workers();
  if (engine.run()) engine.verify_all();
  return result;
}

}  // namespace hugepin::demo
