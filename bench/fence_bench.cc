#include "bench/fence_bench.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <span>
#include <unordered_map>

#include "base/error.h"
#include "bench/stats.h"
#include "protocol/offload_scheduler.h"

namespace hugepin::bench {
namespace {

// The alternative: what an engine writes when it keeps this state in general-purpose
// containers. Same rules on the happy path (quorum of all ranks, holds, fence by the minimum
// release), without rank death.
class NaiveScheduler {
 public:
  NaiveScheduler(uint32_t ranks) : ranks_(ranks), released_(ranks, 0) {}

  JobId dispatch(JobKind, std::span<const ChunkId> chunks) {
    JobId job = next_job_++;
    reported_[job];
    job_chunks_[job].assign(chunks.begin(), chunks.end());
    for (ChunkId chunk : chunks) ++holds_[chunk];
    return job;
  }

  void apply(const Report& report) {
    if (report.kind == ReportKind::kComputeRelease) {
      released_[report.rank] = std::max<Epoch>(released_[report.rank], report.value);
      all_rank_ = *std::min_element(released_.begin(), released_.end());
      return;
    }
    auto it = reported_.find(report.value);
    if (it == reported_.end() || !it->second.insert(report.rank).second) return;  // unknown or duplicate
    if (it->second.size() < ranks_) return;
    for (ChunkId chunk : job_chunks_[report.value]) {
      auto hold = holds_.find(chunk);
      if (--hold->second == 0) holds_.erase(hold);
    }
    job_chunks_.erase(report.value);
    reported_.erase(it);
    completed_.push_back(report.value);
  }

  void retire(ChunkId chunk) { retired_.push_back({chunk, current_}); }
  Epoch begin_epoch() { return ++current_; }

  void take_reusable(std::vector<ChunkId>* out) {
    for (auto it = retired_.begin(); it != retired_.end();) {
      if (it->second <= all_rank_ && holds_.count(it->first) == 0) {
        out->push_back(it->first);
        it = retired_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void take_completed(std::vector<JobId>* out) {
    out->insert(out->end(), completed_.begin(), completed_.end());
    completed_.clear();
  }

 private:
  uint32_t ranks_;
  std::unordered_map<JobId, std::set<uint32_t>> reported_;
  std::unordered_map<JobId, std::vector<ChunkId>> job_chunks_;
  std::map<ChunkId, uint32_t> holds_;
  std::vector<Epoch> released_;
  Epoch all_rank_ = 0;
  Epoch current_ = 1;
  std::deque<std::pair<ChunkId, Epoch>> retired_;
  std::vector<JobId> completed_;
  JobId next_job_ = 1;
};

// The reports of every step, prebuilt: step s applies every rank's copy-complete for the jobs
// of step s - 1 and its compute-release of epoch s (closed at the end of step s - 1).
struct Workload {
  uint32_t ranks = 0;
  uint64_t steps = 0;
  std::vector<Report> reports;
  std::vector<size_t> step_begin;  // steps + 1 offsets into reports
};

Workload build_workload(const FenceBenchOptions& options, uint32_t ranks) {
  Workload workload;
  workload.ranks = ranks;
  uint64_t per_step = uint64_t{ranks} * (options.jobs_per_step + 1);
  workload.steps = (options.reports + per_step - 1) / per_step + 1;  // step 0 has no reports yet
  workload.reports.reserve(per_step * workload.steps);
  std::vector<uint64_t> sequence(ranks, 0);
  for (uint64_t step = 0; step < workload.steps; ++step) {
    workload.step_begin.push_back(workload.reports.size());
    if (step == 0) continue;
    JobId first = (step - 1) * options.jobs_per_step + 1;  // ids are handed out 1, 2, ...
    for (uint32_t rank = 0; rank < ranks; ++rank) {
      for (uint32_t j = 0; j < options.jobs_per_step; ++j) {
        workload.reports.push_back(Report{ReportKind::kCopyComplete, static_cast<uint16_t>(rank), 0, ++sequence[rank],
                                          first + j, 0});
      }
      workload.reports.push_back(
          Report{ReportKind::kComputeRelease, static_cast<uint16_t>(rank), 0, ++sequence[rank], step, 0});
    }
  }
  workload.step_begin.push_back(workload.reports.size());
  return workload;
}

// A FIFO of chunk ids with room for every chunk: the engine's free list and its cache, the
// same for both schedulers, and cheap enough not to hide them.
class ChunkQueue {
 public:
  explicit ChunkQueue(uint32_t capacity) : ring_(capacity) {}
  size_t size() const { return size_; }
  ChunkId front() const { return ring_[head_]; }
  ChunkId at(size_t i) const { return ring_[wrap(head_ + i)]; }
  void push_back(ChunkId chunk) { ring_[wrap(head_ + size_++)] = chunk; }
  void pop_front() {
    head_ = wrap(head_ + 1);
    --size_;
  }

 private:
  size_t wrap(size_t i) const { return i >= ring_.size() ? i - ring_.size() : i; }
  std::vector<ChunkId> ring_;
  size_t head_ = 0;
  size_t size_ = 0;
};

struct RunResult {
  double seconds = 0;
  uint64_t reports = 0;
  uint64_t completed = 0;
  uint64_t reused = 0;
};

// The engine loop, the same for both schedulers.
template <typename Scheduler>
RunResult run_engine(Scheduler& scheduler, const FenceBenchOptions& options, const Workload& workload) {
  ChunkQueue free_chunks(options.chunks);
  for (ChunkId chunk = 0; chunk < options.chunks; ++chunk) free_chunks.push_back(chunk);
  ChunkQueue cached(options.chunks);
  const size_t cached_target = options.chunks / 8;
  std::vector<ChunkId> job(options.chunks_per_job);
  std::vector<ChunkId> back;
  std::vector<JobId> completed;
  RunResult result;
  JobId expected_job = 1;

  const int64_t start = thread_cpu_ns();
  for (uint64_t step = 0; step < workload.steps; ++step) {
    for (uint32_t j = 0; j < options.jobs_per_step; ++j) {
      bool store = j % 2 == 0 || cached.size() < options.chunks_per_job;
      if (store) {
        if (free_chunks.size() < options.chunks_per_job) throw Error("fence bench: the engine ran out of free chunks");
        for (ChunkId& chunk : job) {
          chunk = free_chunks.front();
          free_chunks.pop_front();
        }
      } else {
        size_t at = (step * 7 + j * 13) % (cached.size() - options.chunks_per_job + 1);
        for (size_t i = 0; i < job.size(); ++i) job[i] = cached.at(at + i);
      }
      JobId id = scheduler.dispatch(store ? JobKind::kStore : JobKind::kLoad, job);
      if (id != expected_job++) throw Error(cat("fence bench: job id ", id, " out of order"));
      if (store) {
        for (ChunkId chunk : job) cached.push_back(chunk);
      }
    }
    for (size_t i = workload.step_begin[step]; i < workload.step_begin[step + 1]; ++i) {
      scheduler.apply(workload.reports[i]);
    }
    while (cached.size() > cached_target) {
      scheduler.retire(cached.front());
      cached.pop_front();
    }
    scheduler.begin_epoch();
    back.clear();
    scheduler.take_reusable(&back);
    for (ChunkId chunk : back) free_chunks.push_back(chunk);
    result.reused += back.size();
    completed.clear();
    scheduler.take_completed(&completed);
    result.completed += completed.size();
  }
  result.seconds = static_cast<double>(thread_cpu_ns() - start) / 1e9;
  result.reports = workload.reports.size();
  return result;
}

RunResult run_ours(const FenceBenchOptions& options, const Workload& workload) {
  SchedulerConfig config;
  config.tp = workload.ranks;
  config.pp = 1;
  config.chunks = options.chunks;
  config.max_jobs_in_flight = 4 * options.jobs_per_step;
  OffloadScheduler scheduler(config);
  RunResult result = run_engine(scheduler, options, workload);
  if (scheduler.figures().reports_rejected != 0) {
    throw Error(cat("fence bench: ", scheduler.figures().reports_rejected, " reports rejected"));
  }
  return result;
}

RunResult run_baseline(const FenceBenchOptions& options, const Workload& workload) {
  NaiveScheduler scheduler(workload.ranks);
  return run_engine(scheduler, options, workload);
}

}  // namespace

void check_fence_bench_options(const FenceBenchOptions& options) {
  for (uint32_t ranks : options.rank_counts) {
    if (ranks == 0 || ranks > kMaxRanks) throw Error(cat("fence bench: ", ranks, " ranks; must be 1 to ", kMaxRanks));
  }
  if (options.jobs_per_step == 0 || options.chunks_per_job == 0) {
    throw Error("fence bench: jobs per step and chunks per job must be at least 1");
  }
  uint64_t in_flight = uint64_t{options.jobs_per_step} * options.chunks_per_job * 4;
  if (options.chunks < options.chunks / 8 + in_flight + options.chunks_per_job ||
      options.chunks / 8 < options.chunks_per_job) {
    throw Error(cat("fence bench: ", options.chunks, " chunks are too few for ", options.jobs_per_step, " jobs of ",
                    options.chunks_per_job, " chunks per step"));
  }
  if (options.repeat == 0) throw Error("fence bench: repeat must be at least 1");
}

std::vector<FenceBenchRow> run_fence_bench(const FenceBenchOptions& options,
                                           const std::function<void(const std::string&)>& progress) {
  check_fence_bench_options(options);
  std::vector<FenceBenchRow> rows;
  for (uint32_t ranks : options.rank_counts) {
    Workload workload = build_workload(options, ranks);
    FenceBenchRow row;
    row.ranks = ranks;
    row.reports = workload.reports.size();
    row.steps = workload.steps;
    std::vector<double> ours, baseline;
    for (unsigned run = 0; run < options.warmup + options.repeat; ++run) {
      bool measured = run >= options.warmup;
      progress(cat("TP x PP ", ranks, ": run ", run + 1, " of ", options.warmup + options.repeat,
                   measured ? "" : " (warmup)"));
      RunResult a = run_ours(options, workload);
      RunResult b = run_baseline(options, workload);
      if (a.completed != b.completed || a.reused != b.reused) {
        throw Error(cat("fence bench: hugepin and the baseline disagree at ", ranks, " ranks: ", a.completed, " vs ",
                        b.completed, " jobs completed, ", a.reused, " vs ", b.reused, " chunks reused"));
      }
      if (measured) {
        ours.push_back(static_cast<double>(a.reports) / a.seconds);
        baseline.push_back(static_cast<double>(b.reports) / b.seconds);
      }
    }
    row.ours = summarize(ours);
    row.baseline = summarize(baseline);
    rows.push_back(row);
  }
  return rows;
}

}  // namespace hugepin::bench
