#include "bench/offload_bench.h"

#include <poll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/size.h"
#include "base/timer_slack.h"
#include "bench/offload_worker.h"
#include "bench/scheduler_stalls.h"
#include "bench/stats.h"
#include "cli/engine/chunk_cache.h"
#include "cli/engine/kv_stamp.h"
#include "cli/engine/mini_plan.h"
#include "cli/engine/rank_processes.h"
#include "ipc/doorbell.h"
#include "session/host_plan.h"
#include "session/scheduler_session.h"

namespace hugepin::bench {
namespace {

// A job that reached quorum and when the scheduler saw it. What the ranks measured of it (GPU
// times, when they learned it landed) comes after the row (collect_timings).
struct Settled {
  JobId id = 0;
  int64_t quorum_ns = 0;
};

// The scheduler thread's CPU inside the protocol's own calls: each call is a timed span. A span
// also holds about one read of the thread's CPU clock (a system call), subtracted per span when
// the row is filled in (clock_cost_ns).
struct ProtocolCpu {
  struct Span {
    ProtocolCpu& cpu;
    int64_t start = thread_cpu_ns();
    ~Span() {
      cpu.ns += thread_cpu_ns() - start;
      ++cpu.spans;
    }
  };
  int64_t ns = 0;
  uint64_t spans = 0;
};

// What one read of the thread's CPU clock costs that thread, averaged.
double clock_cost_ns() {
  constexpr int kReads = 4000;
  const int64_t start = thread_cpu_ns();
  for (int i = 0; i < kReads; ++i) thread_cpu_ns();
  return static_cast<double>(thread_cpu_ns() - start) / (kReads + 1);
}

// How a row's jobs go to the ranks and come back settled. The driver (run_jobs) is shared.
class Path {
 public:
  virtual ~Path() = default;
  // Sends `job` to every rank (after pinning its chunks, for hugepin); returns its id.
  virtual JobId dispatch(const cli::CacheJob& job) = 0;
  // Waits up to `timeout_ns` for progress; appends jobs that reached quorum. Returns true when
  // the wait ran out: its timer fired before anything woke it.
  virtual bool progress(int64_t timeout_ns, std::vector<Settled>* settled) = 0;
  virtual void retire(std::span<const ChunkId> chunks) = 0;
  virtual void take_reusable(std::vector<ChunkId>* out) = 0;
  virtual void step() {}
  // How the scheduler's sleeps on the report gate ended so far (hugepin only).
  virtual std::optional<GateWaitCounts> gate_waits() const { return std::nullopt; }
  uint64_t reports = 0;          // taken by the scheduler so far
  int64_t delivery_cpu_ns = 0;   // the scheduler thread's CPU spent sending jobs and steps
  ProtocolCpu cpu;               // ... and in the protocol's calls
};

// Sends one request to every rank, timing it as delivery.
void send_all(const cli::RankProcesses& ranks, const BenchRequest& request, int64_t* delivery_cpu_ns) {
  const int64_t start = thread_cpu_ns();
  for (uint32_t rank = 0; rank < ranks.ranks(); ++rank) send_packet(ranks.channel(rank), request);
  *delivery_cpu_ns += thread_cpu_ns() - start;
}

BenchRequest job_request(BenchOp op, JobId id, const cli::CacheJob& job) {
  BenchRequest request;
  request.op = op;
  request.store = job.op == cli::CacheOp::kStore ? 1 : 0;
  request.job = id;
  request.count = static_cast<uint32_t>(job.chunks.size());
  for (size_t i = 0; i < job.chunks.size(); ++i) request.copies[i] = {job.chunks[i], job.slots[i], 0};
  return request;
}

// Sleeps on the report gate whose timer fired, with or without a wake owed.
uint64_t timers_fired(const GateWaitCounts& waits) { return waits.timed_out + waits.woken_late + waits.no_wake; }

class HugepinPath final : public Path {
 public:
  HugepinPath(SchedulerSession& session, const cli::RankProcesses& ranks, int64_t step_ns)
      : session_(session), ranks_(ranks), step_ns_(step_ns), last_step_(real_os().monotonic_ns()) {}

  JobId dispatch(const cli::CacheJob& job) override {
    JobId id;
    {
      ProtocolCpu::Span span{cpu};
      id = session_.dispatch(cli::job_kind(job.op), job.chunks);
    }
    send_all(ranks_, job_request(BenchOp::kJob, id, job), &delivery_cpu_ns);
    return id;
  }

  bool progress(int64_t timeout_ns, std::vector<Settled>* settled) override {
    bool waited_out = false;
    {
      ProtocolCpu::Span span{cpu};
      // The drain's wait ran out when the timer of a sleep on the report gate fired in it
      // (SchedulerSession::gate_waits, whatever the gate then found).
      const uint64_t timers_before = timers_fired(session_.gate_waits());
      reports += session_.drain(timeout_ns);
      waited_out = timers_fired(session_.gate_waits()) > timers_before;
      ids_.clear();
      session_.take_completed(&ids_);
      failed_.clear();
      session_.take_failed(&failed_);
    }
    const int64_t now = real_os().monotonic_ns();
    for (JobId id : ids_) settled->push_back({id, now});
    if (!failed_.empty()) throw Error(cat("hugepin bench offload: ", failed_.front().message));
    if (now - last_step_ >= step_ns_) step();
    return waited_out;
  }

  void retire(std::span<const ChunkId> chunks) override {
    ProtocolCpu::Span span{cpu};
    for (ChunkId chunk : chunks) session_.retire(chunk);
  }
  std::optional<GateWaitCounts> gate_waits() const override { return session_.gate_waits(); }
  void take_reusable(std::vector<ChunkId>* out) override {
    ProtocolCpu::Span span{cpu};
    session_.take_reusable(out);
  }

  // Closes the epoch; every rank releases it once its copies launched before have landed.
  void step() override {
    BenchRequest request;
    request.op = BenchOp::kEndStep;
    request.value = session_.protocol().current_epoch();
    {
      ProtocolCpu::Span span{cpu};
      session_.begin_epoch();
    }
    send_all(ranks_, request, &delivery_cpu_ns);
    last_step_ = real_os().monotonic_ns();
  }

 private:
  SchedulerSession& session_;
  const cli::RankProcesses& ranks_;
  int64_t step_ns_;
  int64_t last_step_;
  std::vector<JobId> ids_;
  std::vector<FailedJob> failed_;
};

// The engines' way: completions over the ranks' sockets, counted to quorum in a hash map.
class EngineWayPath final : public Path {
 public:
  explicit EngineWayPath(const cli::RankProcesses& ranks) : ranks_(ranks) {
    for (uint32_t rank = 0; rank < ranks.ranks(); ++rank) fds_.push_back({ranks.channel(rank), POLLIN, 0});
  }

  JobId dispatch(const cli::CacheJob& job) override {
    const JobId id = ++last_id_;
    {
      ProtocolCpu::Span span{cpu};
      open_[id] = 0;
    }
    send_all(ranks_, job_request(BenchOp::kEngineJob, id, job), &delivery_cpu_ns);
    return id;
  }

  bool progress(int64_t timeout_ns, std::vector<Settled>* settled) override {
    ProtocolCpu::Span span{cpu};
    const timespec timeout{timeout_ns / 1'000'000'000, timeout_ns % 1'000'000'000};
    const int ready = ::ppoll(fds_.data(), fds_.size(), &timeout, nullptr);
    if (ready <= 0) return ready == 0 && timeout_ns > 0;
    for (uint32_t rank = 0; rank < fds_.size(); ++rank) {
      while (receive_packet(fds_[rank].fd, &reply_, /*wait=*/false)) {
        if (reply_.kind != BenchReplyKind::kCompletions) throw Error("engine way: an unexpected reply from a rank");
        const int64_t now = real_os().monotonic_ns();
        for (uint32_t i = 0; i < reply_.count; ++i) {
          const JobTiming& timing = reply_.timings[i];
          ++reports;
          if (++open_.at(timing.job) < fds_.size()) continue;
          settled->push_back({timing.job, now});
          open_.erase(timing.job);
        }
      }
    }
    return false;
  }

  // No fence: a retired chunk is reusable once its jobs settled, which they have.
  void retire(std::span<const ChunkId> chunks) override {
    ProtocolCpu::Span span{cpu};
    retired_.insert(retired_.end(), chunks.begin(), chunks.end());
  }
  void take_reusable(std::vector<ChunkId>* out) override {
    ProtocolCpu::Span span{cpu};
    out->insert(out->end(), retired_.begin(), retired_.end());
    retired_.clear();
  }

 private:
  const cli::RankProcesses& ranks_;
  std::vector<pollfd> fds_;
  std::unordered_map<JobId, uint32_t> open_;  // job -> ranks that reported it
  std::vector<ChunkId> retired_;
  JobId last_id_ = 0;
  BenchReply reply_;
};

// The calling thread's voluntary context switches so far: how often it went to sleep.
int64_t voluntary_switches() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_nvcsw;
}

// Everything a row measured, before it becomes an OffloadRow.
struct Measured {
  std::vector<double> settle_us, copy_us, overhead_us;
  std::vector<double> landed_us, seen_us;  // the overhead's two parts: GPU end -> rank knows -> quorum seen
  std::vector<double> clock_window_us;     // per timed job: the widest calibration window behind its GPU ends
  std::vector<std::vector<double>> rank_clock_window_us;  // per rank: its window behind each timed job's GPU end
  uint64_t clock_early = 0;                // timed jobs known landed before their GPU end's window began
  std::vector<double> seen_busy_us;          // of each seen_us, the scheduler's time outside collect()
  std::vector<std::optional<CollectSpan>> seen_collect;  // ... and the collect() call that saw it
  CollectSpans collect_spans;                // the window's collect() calls (bench/scheduler_stalls.h)
  std::optional<int64_t> run_queue_wait_ns;  // the scheduler thread's, runnable but not running
  std::optional<GateWaitCounts> gate_waits;  // hugepin: how its sleeps on the gate ended
  double steal_share = 0;                    // the machine's, over the window
  std::unordered_map<JobId, size_t> index;  // job -> its place in the vectors above
  std::vector<Settled> jobs;
  uint64_t bytes = 0;
  uint64_t reports = 0;
  double seconds = 0;
  double protocol_cpu_ns = 0;  // in the protocol's calls, less the clock reads
  int64_t loop_cpu_ns = 0;     // the whole scheduler thread, less the jobs' delivery
  int64_t sleeps = 0;          // its voluntary context switches
  int64_t ranks_cpu_ns = 0;    // the rank processes' CPU, summed
  double in_flight_job_ns = 0;  // jobs out, integrated over the window: / window = the mean
  int64_t no_job_ns = 0;        // time with fewer than jobs_in_flight out because no job could be made
  std::vector<RankThreadGroup> rank_threads;  // totals in ns until fill_row
};

// One rank thread's schedstat so far, keyed by "pid/tid".
struct ThreadSample {
  std::string group;
  int64_t run_ns = 0;
  int64_t wait_ns = 0;
};
using ThreadSamples = std::map<std::string, ThreadSample>;

// A thread's name without its trailing number ("cuda00001400006" -> "cuda").
std::string thread_group(std::string name) {
  while (!name.empty() && (name.back() == '\n' || std::isdigit(static_cast<unsigned char>(name.back())) != 0)) {
    name.pop_back();
  }
  return name.empty() ? "?" : name;
}

// Per name, what the threads ran and waited between two samples (threads born between count from 0).
std::vector<RankThreadGroup> thread_groups(const ThreadSamples& before, const ThreadSamples& after) {
  std::map<std::string, RankThreadGroup> groups;
  for (const auto& [key, sample] : after) {
    RankThreadGroup& group = groups[sample.group];
    group.name = sample.group;
    ++group.threads;
    auto old = before.find(key);
    group.cpu_us_per_job += static_cast<double>(sample.run_ns - (old != before.end() ? old->second.run_ns : 0));
    group.run_queue_wait_us_per_job +=
        static_cast<double>(sample.wait_ns - (old != before.end() ? old->second.wait_ns : 0));
  }
  std::vector<RankThreadGroup> out;
  for (auto& [name, group] : groups) out.push_back(group);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.cpu_us_per_job > b.cpu_us_per_job; });
  return out;
}

// The calling thread's time runnable but waiting for a CPU so far, in ns; none where the kernel
// keeps no schedstat.
std::optional<int64_t> thread_run_queue_wait_ns() {
  const std::optional<SchedStat> stat = read_schedstat(real_os(), "/proc/thread-self/schedstat");
  return stat ? std::optional<int64_t>(stat->wait_ns) : std::nullopt;
}

class OffloadRun {
 public:
  OffloadRun(const OffloadBenchOptions& options, uint64_t block_bytes, int gpus)
      : options_(options),
        block_bytes_(block_bytes),
        arena_(cat("bench-offload-", getpid(), "-", block_bytes / 1024, "k")),
        session_(create_session()),
        geometry_(session_.geometry()),
        slots_(gpu_blocks() / options.blocks_per_chunk),
        ranks_(geometry_.ranks(), [this, gpus](uint32_t rank, int channel) {
          OffloadWorkerSetup setup{arena_,
                                   rank,
                                   options_.tp,
                                   channel,
                                   gpus > 0 ? static_cast<int>(rank % gpus) : -1,
                                   gpu_blocks(),
                                   options_.poll_interval_ns,
                                   options_.completion_poll_ns,
                                   options_.spin,
                                   options_.time_every};
          run_offload_worker(setup);
        }) {
    for (uint32_t rank = 0; rank < geometry_.ranks(); ++rank) ranks_.spawn(rank);
  }

  // The ranks detach and exit before the arena goes (with the session).
  ~OffloadRun() {
    BenchRequest stop;
    stop.op = BenchOp::kStop;
    try {
      for (uint32_t rank = 0; rank < ranks_.ranks(); ++rank) send_packet(ranks_.channel(rank), stop);
      ranks_.wait_all();
    } catch (const Error& error) {
      std::cerr << "hugepin bench offload: stopping the ranks: " << error.what() << "\n";
    }
  }

  uint64_t chunk_count() const { return geometry_.chunk_count(); }

  OffloadRow copy_engine_row(Mix mix) {
    BenchRequest burst;
    burst.op = BenchOp::kBurst;
    burst.seconds = options_.seconds;
    burst.mix = mix;
    burst.jobs_in_flight = options_.jobs_in_flight;
    burst.chunks_per_job = options_.chunks_per_job;
    int64_t ignored = 0;
    send_all(ranks_, burst, &ignored);
    OffloadRow row = blank_row(mix, OffloadPath::kCopyEngine);
    for (uint32_t rank = 0; rank < ranks_.ranks(); ++rank) {
      BenchReply reply = receive_reply(rank, BenchReplyKind::kBurstDone);
      row.bytes += reply.bytes;
      row.seconds = std::max(row.seconds, reply.seconds);
    }
    row.gb_per_second = static_cast<double>(row.bytes) / row.seconds / 1e9;
    return row;
  }

  OffloadRow protocol_row(Mix mix, OffloadPath path_kind) {
    const uint64_t tag = ++tag_;
    stamp_slots(tag);
    HugepinPath hugepin(session_, ranks_, options_.step_ns);
    EngineWayPath engine_way(ranks_);
    Path& path = path_kind == OffloadPath::kHugepin ? static_cast<Path&>(hugepin) : engine_way;
    // --wait-slack-us for the engine way's ppoll: the thread's slack widened for the whole row, with
    // no system call per wait (hugepin's drain pays three around each of its sleeps).
    std::optional<TimerSlackScope> engine_way_slack;
    if (path_kind == OffloadPath::kEngineWay && options_.collect_every_ns == 0) {
      engine_way_slack.emplace(options_.wait_slack_ns);
    }
    Measured measured = run_jobs(path, mix);
    collect_timings(&measured);
    OffloadRow row = blank_row(mix, path_kind);
    fill_row(measured, &row);
    check_sample(tag, &row);
    return row;
  }

 private:
  uint64_t gpu_blocks() const {
    // Twice the slots the jobs in flight hold: GPU slots never limit the row.
    return 2ull * options_.jobs_in_flight * options_.chunks_per_job * options_.blocks_per_chunk;
  }

  SchedulerSession create_session() {
    cli::MiniPlan mini{options_.tp, options_.pp, options_.cpu_bytes, options_.blocks_per_chunk, gpu_blocks(), 0,
                       block_bytes_ / 4096};
    const planner::PlanInput input = cli::mini_plan_input(mini);
    const planner::CapacityPlan plan = planner::make_plan(input, read_host_info(real_os(), input));
    SchedulerSessionOptions options;
    options.max_jobs_in_flight = 4 * options_.jobs_in_flight;
    options.wait_timer_slack_ns = options_.wait_slack_ns;
    return SchedulerSession::create(real_os(), arena_, plan, {}, options);
  }

  OffloadRow blank_row(Mix mix, OffloadPath path) const {
    OffloadRow row;
    row.block_bytes = block_bytes_;
    row.mix = mix;
    row.path = path;
    return row;
  }

  BenchReply receive_reply(uint32_t rank, BenchReplyKind kind) {
    BenchReply reply;
    receive_packet(ranks_.channel(rank), &reply, /*wait=*/true);
    if (reply.kind != kind) throw Error(cat("rank ", rank, ": an unexpected reply (", static_cast<int>(reply.kind), ")"));
    if (reply.failed != 0) throw Error(reply.message);
    return reply;
  }

  void stamp_slots(uint64_t tag) {
    BenchRequest stamp;
    stamp.op = BenchOp::kStamp;
    stamp.value = tag;
    int64_t ignored = 0;
    send_all(ranks_, stamp, &ignored);
    for (uint32_t rank = 0; rank < ranks_.ranks(); ++rank) receive_reply(rank, BenchReplyKind::kAck);
    origin_slot_.assign(slots_, 0);
    for (uint64_t s = 0; s < slots_; ++s) origin_slot_[s] = static_cast<int64_t>(s);
    origin_chunk_.assign(geometry_.chunk_count(), -1);  // unknown until stored in this row
  }

  // The job's effect on what each slot and chunk holds, in the order jobs reached quorum.
  void track(const cli::CacheJob& job) {
    for (size_t i = 0; i < job.chunks.size(); ++i) {
      if (job.op == cli::CacheOp::kStore) origin_chunk_[job.chunks[i]] = origin_slot_[job.slots[i]];
      if (job.op == cli::CacheOp::kLoad) origin_slot_[job.slots[i]] = origin_chunk_[job.chunks[i]];
    }
  }

  // Free and retiring chunks the cache keeps (OffloadBenchOptions::keep_free_share).
  size_t want_free() const {
    const uint64_t floor = 2ull * options_.jobs_in_flight * options_.chunks_per_job;
    return std::max<uint64_t>(floor, static_cast<uint64_t>(options_.keep_free_share * geometry_.chunk_count()));
  }

  // The next job of `mix`, evicting idle stored chunks when few are free.
  std::optional<cli::CacheJob> next_job(cli::ChunkCache& cache, Path& path, Mix mix, bool* store_next) {
    const std::vector<ChunkId> evicted = cache.evict(want_free());
    if (!evicted.empty()) path.retire(evicted);
    cli::CacheOp op = mix == Mix::kStore ? cli::CacheOp::kStore : cli::CacheOp::kLoad;
    if (mix == Mix::kMixed) {
      op = *store_next ? cli::CacheOp::kStore : cli::CacheOp::kLoad;
      *store_next = !*store_next;
    }
    std::optional<cli::CacheJob> job = cache.begin(op, options_.chunks_per_job);
    if (!job && mix == Mix::kMixed) job = cache.begin(cli::CacheOp::kStore, options_.chunks_per_job);
    return job;
  }

  // Learns which jobs settled: sleeps up to collect_timeout_ns until one can, or, once per step
  // (collect_every_ns), sleeps to the step's end outside the protocol and looks without waiting.
  // Returns true when it waited out its timeout (waking per job only).
  bool collect(Path& path, std::vector<Settled>* settled) {
    if (options_.collect_every_ns == 0) return path.progress(options_.collect_timeout_ns, settled);
    const int64_t now = real_os().monotonic_ns();
    next_collect_ns_ = std::max(next_collect_ns_ + options_.collect_every_ns, now);  // a late step is not made up
    const timespec at{next_collect_ns_ / 1'000'000'000, next_collect_ns_ % 1'000'000'000};
    while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr) == EINTR) {
    }
    return path.progress(0, settled);
  }

  // Runs jobs until the window ends and every job settled, then gives every chunk back.
  Measured run_jobs(Path& path, Mix mix) {
    cli::ChunkCache cache(geometry_.chunk_count(), slots_, 7);
    std::unordered_map<JobId, std::pair<cli::CacheJob, int64_t>> open;  // job, dispatch time
    std::vector<Settled> settled;
    std::vector<ChunkId> reusable;
    Measured measured;
    auto settle = [&](bool timed, int64_t window_end) {
      for (const Settled& done : settled) {
        auto it = open.find(done.id);
        track(it->second.first);
        cache.completed(it->second.first);
        if (timed && done.quorum_ns <= window_end) {
          measured.index[done.id] = measured.jobs.size();
          measured.jobs.push_back(done);
          measured.settle_us.push_back((done.quorum_ns - it->second.second) / 1e3);
          measured.bytes += it->second.first.chunks.size() * geometry_.chunk_bytes_all_ranks();
        }
        open.erase(it);
      }
      settled.clear();
      reusable.clear();
      path.take_reusable(&reusable);
      for (ChunkId chunk : reusable) cache.reusable(chunk);
    };
    int64_t cpu_end = 0;
    int64_t delivery_end = 0;
    ProtocolCpu protocol_end;
    int64_t sleeps_end = 0;
    std::optional<int64_t> run_queue_wait_end;
    std::optional<GateWaitCounts> gate_waits_end;
    MachineCpuTicks steal_end;
    int64_t ranks_cpu_end = 0;
    ThreadSamples threads_end;
    auto run = [&](Mix run_mix, int64_t until, bool timed, uint64_t stop_after_stored) {
      bool store_next = true;
      // How many jobs were out, and since when, for the window's mean; `short_of_jobs`: fewer than
      // jobs_in_flight because the cache could make no job (hugepin: chunks still behind the fence).
      int64_t since = real_os().monotonic_ns();
      size_t out = 0;
      bool short_of_jobs = false;
      auto account = [&](bool short_now) {
        const int64_t now = std::min(real_os().monotonic_ns(), until);
        if (timed && now > since) {
          measured.in_flight_job_ns += static_cast<double>(out) * static_cast<double>(now - since);
          if (short_of_jobs) measured.no_job_ns += now - since;
        }
        since = now;
        out = open.size();
        short_of_jobs = short_now;
      };
      while (real_os().monotonic_ns() < until && cache.stored() < stop_after_stored) {
        while (open.size() < options_.jobs_in_flight) {
          std::optional<cli::CacheJob> job = next_job(cache, path, run_mix, &store_next);
          if (!job) break;
          const int64_t now = real_os().monotonic_ns();
          const JobId id = path.dispatch(*job);
          open.emplace(id, std::make_pair(std::move(*job), now));
        }
        account(open.size() < options_.jobs_in_flight);
        const int64_t collect_start = real_os().monotonic_ns();
        const bool waited_out = collect(path, &settled);
        if (timed) measured.collect_spans.add({collect_start, real_os().monotonic_ns(), waited_out});
        settle(timed, until);
        account(false);  // settled jobs are replaced right away, at the loop's top
        options_.check_interrupted();
      }
      cpu_end = thread_cpu_ns();
      delivery_end = path.delivery_cpu_ns;
      protocol_end = path.cpu;
      sleeps_end = voluntary_switches();
      run_queue_wait_end = thread_run_queue_wait_ns();
      gate_waits_end = path.gate_waits();
      steal_end = machine_cpu_ticks(real_os());
      ranks_cpu_end = ranks_cpu_ns();
      threads_end = rank_thread_samples();
      while (!open.empty()) {  // let the rest land; outside the window they do not count
        path.progress(1'000'000, &settled);
        settle(timed, until);
      }
    };
    if (mix == Mix::kLoad) {  // something to load: about half the chunks stored first, untimed
      const uint64_t in_flight = uint64_t{options_.jobs_in_flight} * options_.chunks_per_job;
      run(Mix::kStore, real_os().monotonic_ns() + 30'000'000'000, false, (geometry_.chunk_count() - 2 * in_flight) / 2);
    }
    const double clock_cost = clock_cost_ns();
    const int64_t reports_before = static_cast<int64_t>(path.reports);
    const int64_t delivery_before = path.delivery_cpu_ns;
    const ProtocolCpu protocol_before = path.cpu;
    const int64_t sleeps_before = voluntary_switches();
    const std::optional<int64_t> run_queue_wait_before = thread_run_queue_wait_ns();
    const std::optional<GateWaitCounts> gate_waits_before = path.gate_waits();
    const MachineCpuTicks steal_before = machine_cpu_ticks(real_os());
    const int64_t ranks_cpu_before = ranks_cpu_ns();
    const ThreadSamples threads_before = rank_thread_samples();
    const int64_t cpu_start = thread_cpu_ns();
    const int64_t start = real_os().monotonic_ns();
    const int64_t window_end = start + static_cast<int64_t>(options_.seconds * 1e9);
    run(mix, window_end, true, UINT64_MAX);
    measured.seconds = options_.seconds;
    measured.loop_cpu_ns = (cpu_end - cpu_start) - (delivery_end - delivery_before);
    measured.protocol_cpu_ns =
        std::max(0.0, static_cast<double>(protocol_end.ns - protocol_before.ns) -
                          clock_cost * static_cast<double>(protocol_end.spans - protocol_before.spans));
    measured.sleeps = sleeps_end - sleeps_before;
    if (run_queue_wait_before && run_queue_wait_end) measured.run_queue_wait_ns = *run_queue_wait_end - *run_queue_wait_before;
    if (gate_waits_before && gate_waits_end) {
      measured.gate_waits = GateWaitCounts{gate_waits_end->waits - gate_waits_before->waits,
                                           gate_waits_end->timed_out - gate_waits_before->timed_out,
                                           gate_waits_end->woken_late - gate_waits_before->woken_late,
                                           gate_waits_end->no_wake - gate_waits_before->no_wake};
    }
    measured.steal_share = steal_share(steal_before, steal_end);
    measured.ranks_cpu_ns = ranks_cpu_end - ranks_cpu_before;
    measured.rank_threads = thread_groups(threads_before, threads_end);
    measured.reports = path.reports - reports_before;
    give_back_all(cache, path);
    return measured;
  }

  struct RankTimes {
    int64_t gpu_done_ns = 0;
    int64_t copy_ns = 0;
    int64_t landed_ns = 0;
    int64_t window_ns = 0;  // the widest calibration window behind the ranks' GPU ends
  };

  void record_gpu(JobId id, const RankTimes& times, Measured* measured) {
    const Settled& job = measured->jobs[measured->index.at(id)];
    measured->copy_us.push_back(times.copy_ns / 1e3);
    measured->overhead_us.push_back((job.quorum_ns - times.gpu_done_ns) / 1e3);
    measured->landed_us.push_back((times.landed_ns - times.gpu_done_ns) / 1e3);
    measured->clock_window_us.push_back(times.window_ns / 1e3);
    // The last rank cannot have known its copies landed before they ended: an end placed later
    // than that by more than half its window is the clock's error, not a fast report.
    if (times.landed_ns - times.gpu_done_ns < -times.window_ns / 2) ++measured->clock_early;
    measured->seen_us.push_back((job.quorum_ns - times.landed_ns) / 1e3);
    measured->seen_busy_us.push_back(measured->collect_spans.outside(times.landed_ns, job.quorum_ns) / 1e3);
    measured->seen_collect.push_back(measured->collect_spans.span_at(job.quorum_ns));
  }

  // The rank processes' CPU so far (every thread; /proc/PID/stat, in clock ticks of 10 ms: a
  // row of seconds reads it to about 1%).
  int64_t ranks_cpu_ns() const {
    static const long ticks_per_second = sysconf(_SC_CLK_TCK);
    int64_t total = 0;
    for (uint32_t rank = 0; rank < ranks_.ranks(); ++rank) {
      std::string stat;
      if (real_os().read_file(cat("/proc/", ranks_.pid(rank), "/stat"), &stat) != 0) continue;
      const size_t name_end = stat.rfind(')');
      if (name_end == std::string::npos) continue;
      std::istringstream fields(stat.substr(name_end + 1));
      std::string field;
      uint64_t utime = 0, stime = 0;
      for (int i = 3; i <= 15 && fields >> field; ++i) {  // field 3 is the state; 14 utime, 15 stime
        if (i == 14) utime = std::stoull(field);
        if (i == 15) stime = std::stoull(field);
      }
      total += static_cast<int64_t>((utime + stime) * 1'000'000'000 / ticks_per_second);
    }
    return total;
  }

  // Every rank thread's run and run-queue wait time so far (/proc/PID/task/TID/schedstat: ns,
  // where /proc/PID/stat counts 10 ms ticks), and its name (comm). A thread that ends between
  // the listing and the reads is left out.
  ThreadSamples rank_thread_samples() const {
    ThreadSamples samples;
    for (uint32_t rank = 0; rank < ranks_.ranks(); ++rank) {
      const std::string task = cat("/proc/", ranks_.pid(rank), "/task");
      std::vector<std::string> tids;
      if (real_os().list_dir(task, &tids) != 0) continue;
      for (const std::string& tid : tids) {
        const std::optional<SchedStat> stat = read_schedstat(real_os(), cat(task, "/", tid, "/schedstat"));
        std::string comm;
        if (!stat || real_os().read_file(cat(task, "/", tid, "/comm"), &comm) != 0) continue;
        samples.emplace(cat(ranks_.pid(rank), "/", tid), ThreadSample{thread_group(comm), stat->run_ns, stat->wait_ns});
      }
    }
    return samples;
  }

  // Every stored chunk retired and back through the fence, so the next row starts clean.
  void give_back_all(cli::ChunkCache& cache, Path& path) {
    path.retire(cache.evict(geometry_.chunk_count()));
    std::vector<Settled> none;
    std::vector<ChunkId> reusable;
    for (int64_t deadline = real_os().monotonic_ns() + 30'000'000'000; cache.free() < geometry_.chunk_count();) {
      if (real_os().monotonic_ns() > deadline) throw Error("chunks did not come back through the fence within 30 s");
      path.step();
      path.progress(1'000'000, &none);
      reusable.clear();
      path.take_reusable(&reusable);
      for (ChunkId chunk : reusable) cache.reusable(chunk);
    }
  }

  // After a protocol row: each rank's timings of its timed jobs (time_every); a job's are its
  // slowest rank's (the latest GPU end, the longest GPU time, the latest moment a rank learned).
  void collect_timings(Measured* measured) {
    BenchRequest request;
    request.op = BenchOp::kTimings;
    int64_t ignored = 0;
    send_all(ranks_, request, &ignored);
    std::unordered_map<JobId, RankTimes> latest;  // the latest over ranks
    measured->rank_clock_window_us.assign(ranks_.ranks(), {});
    for (uint32_t rank = 0; rank < ranks_.ranks(); ++rank) {
      for (BenchReply reply; reply.count == kMaxTimingsPerPacket || reply.kind != BenchReplyKind::kTimings;) {
        reply = receive_reply(rank, BenchReplyKind::kTimings);
        for (uint32_t i = 0; i < reply.count; ++i) {
          const JobTiming& timing = reply.timings[i];
          // Outside the window, or not timed (OffloadBenchOptions::time_every).
          if (measured->index.count(timing.job) == 0 || timing.gpu_done_ns == 0) continue;
          RankTimes& times = latest[timing.job];
          times.gpu_done_ns = std::max(times.gpu_done_ns, timing.gpu_done_ns);
          times.copy_ns = std::max(times.copy_ns, timing.copy_ns);
          times.landed_ns = std::max(times.landed_ns, timing.landed_ns);
          times.window_ns = std::max(times.window_ns, timing.gpu_done_window_ns);
          measured->rank_clock_window_us[rank].push_back(timing.gpu_done_window_ns / 1e3);
        }
      }
    }
    for (const auto& [job, times] : latest) record_gpu(job, times, measured);
  }

  void fill_row(const Measured& m, OffloadRow* row) const {
    row->seconds = m.seconds;
    row->jobs = m.jobs.size();
    row->timed_jobs = m.copy_us.size();
    row->bytes = m.bytes;
    row->gb_per_second = static_cast<double>(m.bytes) / m.seconds / 1e9;
    row->settle_p50_us = percentile(m.settle_us, 50);
    row->settle_p99_us = percentile(m.settle_us, 99);
    row->copy_p50_us = percentile(m.copy_us, 50);
    row->overhead_p50_us = percentile(m.overhead_us, 50);
    row->overhead_p99_us = percentile(m.overhead_us, 99);
    row->landed_p50_us = percentile(m.landed_us, 50);
    row->landed_p99_us = percentile(m.landed_us, 99);
    row->clock_window_p50_us = percentile(m.clock_window_us, 50);
    row->clock_window_max_us = m.clock_window_us.empty() ? 0 : *std::max_element(m.clock_window_us.begin(), m.clock_window_us.end());
    row->clock_early_jobs = m.clock_early;
    row->rank_clock_window_p50_us.clear();
    for (const std::vector<double>& windows : m.rank_clock_window_us) {
      row->rank_clock_window_p50_us.push_back(windows.empty() ? std::nullopt
                                                              : std::optional<double>(percentile(windows, 50)));
    }
    row->seen_p50_us = percentile(m.seen_us, 50);
    row->seen_p99_us = percentile(m.seen_us, 99);
    const double jobs = std::max<double>(1, static_cast<double>(m.jobs.size()));
    row->cpu_us_per_job = m.protocol_cpu_ns / 1e3 / jobs;
    row->cpu_us_per_job_rank = row->cpu_us_per_job / geometry_.ranks();
    row->loop_cpu_us_per_job = static_cast<double>(m.loop_cpu_ns) / 1e3 / jobs;
    row->sleeps_per_job = static_cast<double>(m.sleeps) / jobs;
    row->ranks_cpu_us_per_job = static_cast<double>(m.ranks_cpu_ns) / 1e3 / jobs;
    row->mean_jobs_in_flight = m.in_flight_job_ns / (m.seconds * 1e9);
    row->no_job_share = static_cast<double>(m.no_job_ns) / (m.seconds * 1e9);
    row->rank_threads = m.rank_threads;
    for (RankThreadGroup& group : row->rank_threads) {
      group.cpu_us_per_job /= 1e3 * jobs;
      group.run_queue_wait_us_per_job /= 1e3 * jobs;
    }
    row->reports_per_second = static_cast<double>(m.reports) / m.seconds;
    fill_stall_figures(m, row);
  }

  // Where the slowest SEEN times went (bench/scheduler_stalls.h).
  void fill_stall_figures(const Measured& m, OffloadRow* row) const {
    const double jobs = std::max<double>(1, static_cast<double>(m.jobs.size()));
    const bool waits = options_.collect_every_ns == 0;  // collect calls that wait: waking per job
    if (m.run_queue_wait_ns) {
      row->scheduler_run_queue_wait_us_per_job = static_cast<double>(*m.run_queue_wait_ns) / 1e3 / jobs;
    }
    row->steal_share = m.steal_share;
    row->gate_waits = m.gate_waits;
    row->longest_outside_collect_us = static_cast<double>(m.collect_spans.longest_gap()) / 1e3;
    if (waits) row->collect_timeouts = m.collect_spans.waited_out();
    double seen = 0, busy = 0;
    size_t after_timeout = 0;
    for (size_t i = 0; i < m.seen_us.size(); ++i) {
      if (m.seen_us[i] < row->seen_p99_us) continue;
      seen += m.seen_us[i];
      busy += m.seen_busy_us[i];
      const std::optional<CollectSpan>& call = m.seen_collect[i];
      if (call && call->waited_out) ++after_timeout;
      OffloadRow::LateSeen late{m.seen_us[i], m.seen_busy_us[i]};
      if (call) late.collect_call_us = static_cast<double>(call->end_ns - call->start_ns) / 1e3;
      row->late_seen.push_back(late);
    }
    std::sort(row->late_seen.begin(), row->late_seen.end(),
              [](const auto& a, const auto& b) { return a.seen_us > b.seen_us; });
    if (row->late_seen.empty()) return;
    row->late_seen_busy_share = seen > 0 ? busy / seen : 0;
    if (waits) row->late_seen_after_timeout_share = static_cast<double>(after_timeout) / row->late_seen.size();
  }

  // A sample of host chunks (read here from every rank's region) and of GPU slots (read by the
  // ranks) whose stamps this row's jobs determined: each must hold exactly that stamp.
  void check_sample(uint64_t tag, OffloadRow* row) {
    constexpr size_t kSample = 16;
    std::vector<ChunkId> chunks;
    for (ChunkId c = 0; c < origin_chunk_.size() && chunks.size() < kSample; ++c) {
      if (origin_chunk_[c] >= 0) chunks.push_back(c);
    }
    for (uint32_t rank = 0; rank < geometry_.ranks(); ++rank) {
      MappedRegion region = open_region(real_os(), arena_, rank, /*writable=*/false);
      for (ChunkId chunk : chunks) {
        for (size_t s = 0; s < geometry_.rank(rank).segments.size(); ++s) {
          const std::span<const std::byte> blocks(region.data() + geometry_.host_block_offset(rank, s, chunk, 0),
                                                  geometry_.chunk_segment_bytes(rank, s));
          const cli::ChunkStamp stamp{static_cast<uint64_t>(origin_chunk_[chunk]), tag, rank, s};
          if (auto b = cli::wrong_block(blocks, geometry_.rank(rank).segments[s].bytes_per_block, stamp)) {
            throw Error(cat("rank ", rank, ": host chunk ", chunk, " segment ", s, " block ", *b,
                            " does not hold what GPU slot ", origin_chunk_[chunk], " held"));
          }
        }
        ++row->chunks_checked;
      }
    }
    BenchRequest check;
    check.op = BenchOp::kCheck;
    check.value = tag;
    for (uint64_t s = 0; s < slots_ && check.count < kSample; ++s) {
      if (origin_slot_[s] >= 0) check.copies[check.count++] = {0, s, static_cast<uint64_t>(origin_slot_[s])};
    }
    int64_t ignored = 0;
    send_all(ranks_, check, &ignored);
    for (uint32_t rank = 0; rank < ranks_.ranks(); ++rank) receive_reply(rank, BenchReplyKind::kAck);
    row->slots_checked = uint64_t{check.count} * ranks_.ranks();
  }

  const OffloadBenchOptions& options_;
  uint64_t block_bytes_;
  std::string arena_;
  SchedulerSession session_;
  const ChunkGeometry& geometry_;
  uint64_t slots_;
  cli::RankProcesses ranks_;
  uint64_t tag_ = 0;
  int64_t next_collect_ns_ = 0;  // the end of the scheduler's current step (collect_every_ns)
  std::vector<int64_t> origin_slot_;   // the slot whose stamp each GPU slot holds; -1: unknown
  std::vector<int64_t> origin_chunk_;  // the same for each host chunk
};

}  // namespace

const char* path_name(OffloadPath path) {
  switch (path) {
    case OffloadPath::kCopyEngine: return "copy engine";
    case OffloadPath::kHugepin: return "hugepin";
    case OffloadPath::kEngineWay: return "engine way";
  }
  return "?";
}

const char* mix_name(Mix mix) { return mix == Mix::kMixed ? "mixed" : mix == Mix::kStore ? "store" : "load"; }

Mix parse_mix(const std::string& text) {
  for (Mix mix : {Mix::kMixed, Mix::kStore, Mix::kLoad}) {
    if (text == mix_name(mix)) return mix;
  }
  throw Error(cat("unknown mix '", text, "' (mixed, store, load)"));
}

void check_offload_bench_options(const OffloadBenchOptions& o) {
  if (o.tp == 0 || o.pp == 0 || o.tp * o.pp > 64) throw Error(cat("--tp ", o.tp, " x --pp ", o.pp, ": 1 to 64 ranks"));
  if (o.block_bytes.empty() || o.mixes.empty()) throw Error("no block size or no mix to run");
  for (uint64_t bytes : o.block_bytes) {
    if (bytes == 0 || bytes % (8 << 10) != 0 || bytes > (4u << 20)) {
      throw Error(cat("--blocks ", format_bytes(bytes), ": a multiple of 8 KiB up to 4 MiB"));
    }
  }
  if (!(o.seconds > 0 && o.seconds <= 600)) throw Error(cat("--seconds ", o.seconds, ": more than 0, at most 600"));
  if (o.jobs_in_flight == 0 || o.jobs_in_flight > 256) throw Error(cat("--jobs-in-flight ", o.jobs_in_flight, ": 1 to 256"));
  if (o.chunks_per_job == 0 || o.chunks_per_job > kMaxCopiesPerPacket) {
    throw Error(cat("--chunks-per-job ", o.chunks_per_job, ": 1 to ", kMaxCopiesPerPacket));
  }
  if (!(o.keep_free_share >= 0 && o.keep_free_share <= 0.5)) {
    throw Error(cat("--keep-free ", o.keep_free_share, ": a share of the chunks from 0 to 0.5"));
  }
  if (o.time_every == 0) throw Error("--time-every 0: time one job in 1 (every job) or more");
  if (o.cpu_bytes == 0) throw Error("--cpu-bytes 0: the host KV needs room for the chunks in flight");
  if (o.collect_every_ns < 0 || o.collect_every_ns > 1'000'000'000) {
    throw Error(cat("--collect-every-us ", o.collect_every_ns / 1e3, ": 0 (wake per job) to 1000000"));
  }
  if (o.collect_timeout_ns < 10'000 || o.collect_timeout_ns > 1'000'000'000) {
    throw Error(cat("--collect-timeout-us ", o.collect_timeout_ns / 1e3, ": 10 to 1000000"));
  }
  if (o.wait_slack_ns < 0 || o.wait_slack_ns > 1'000'000'000) {
    throw Error(cat("--wait-slack-us ", o.wait_slack_ns / 1e3, ": 0 (the thread's own) to 1000000"));
  }
  if (o.backend != "auto" && o.backend != "gpu" && o.backend != "host") {
    throw Error(cat("--backend ", o.backend, ": auto, gpu or host"));
  }
}

OffloadBenchResult run_offload_bench(const OffloadBenchOptions& options,
                                     const std::function<void(const std::string&)>& progress) {
  check_offload_bench_options(options);
  OffloadBenchResult result;
  result.gpus = cli::gpus_for_backend(options.backend);
  result.gpu = result.gpus > 0;
  result.ranks = options.tp * options.pp;
  for (uint64_t block : options.block_bytes) {
    progress(cat(format_bytes(block), " blocks: creating the arena and starting ", result.ranks, " ranks"));
    OffloadRun run(options, block, result.gpus);
    result.chunk_counts.push_back(run.chunk_count());
    const uint64_t in_flight = uint64_t{options.jobs_in_flight} * options.chunks_per_job;
    if (run.chunk_count() < 4 * in_flight) {
      throw Error(cat("--cpu-bytes ", format_bytes(options.cpu_bytes), " gives ", run.chunk_count(), " chunks of ",
                      format_bytes(block), " blocks: at least ", 4 * in_flight, " are needed for ",
                      options.jobs_in_flight, " jobs of ", options.chunks_per_job, " chunks in flight"));
    }
    for (Mix mix : options.mixes) {
      progress(cat(format_bytes(block), " ", mix_name(mix), ": copy engine alone"));
      const OffloadRow ceiling = run.copy_engine_row(mix);
      result.rows.push_back(ceiling);
      for (OffloadPath path : {OffloadPath::kHugepin, OffloadPath::kEngineWay}) {
        progress(cat(format_bytes(block), " ", mix_name(mix), ": ", path_name(path)));
        OffloadRow row = run.protocol_row(mix, path);
        row.of_ceiling = ceiling.gb_per_second > 0 ? row.gb_per_second / ceiling.gb_per_second : 0;
        result.chunks_checked += row.chunks_checked;
        result.slots_checked += row.slots_checked;
        result.rows.push_back(row);
      }
      result.rows[result.rows.size() - 3].of_ceiling = 1;
    }
  }
  return result;
}

}  // namespace hugepin::bench
