// Deterministic randomized simulation of the offload protocol against the real OffloadScheduler.
//
// Each seed draws a layout (TP x PP, chunks, job table size, barrier) and then a random
// interleaving of: dispatches, worker processes finishing copies (well or not) and GPU epochs,
// reports delivered from each rank's ring in order, retirements, new epochs, declared rank
// deaths (true or false suspicions), crashes, kills, exits, replacements, and bad reports.
//
// Beside the scheduler runs a shadow: the ground truth of what each process may still touch
// (the copies it may be doing, the GPU work it has finished, whether it exists) and a plain
// restatement of the rules (holds, settled ranks, quarantine, the all-rank epoch as a minimum
// over a vector). After every step the scheduler must agree with the shadow exactly; whenever
// the scheduler hands a chunk back, the ground truth must say nothing can touch it. At the end
// every process finishes its work and every retired chunk must come back.
//
// HUGEPIN_SIM_SEEDS overrides the number of seeds (default 3000).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "protocol/offload_scheduler.h"

// Formats the message only when the check fails: the simulation checks millions of times.
#define SIM_CHECK(ok, ...)             \
  do {                                 \
    ++checks_made;                     \
    if (!(ok)) fail(cat(__VA_ARGS__)); \
  } while (0)

namespace hugepin {
namespace {

uint64_t checks_made = 0;

struct SimJob {
  JobKind kind = JobKind::kLoad;
  std::vector<ChunkId> chunks;
  std::vector<uint8_t> settled;  // the rank reported it (applied) or exited
  std::vector<uint8_t> copied;   // ground truth: the rank's process copied it well
  bool failed = false;
};

struct SimRank {
  // Ground truth: the rank's current process.
  bool alive = true;
  bool admitted = true;  // its attach was applied (the first processes are admitted)
  std::set<JobId> copying;
  Epoch done = 0;  // GPU work finished through this epoch
  uint64_t next_sequence = 1;
  uint64_t pid = 0;
  std::deque<Report> ring;  // posted, not yet delivered
  // The scheduler's view, as the rules say it must be.
  RankLiveness state = RankLiveness::kLive;
  uint64_t last_sequence = 0;
  Epoch released = 0;
  uint64_t known_pid = 0;
  uint64_t exited_pid = 0;  // the known pid when its exit was confirmed
};

struct SimChunk {
  bool retired = false;
  Epoch stamp = 0;  // the epoch it was retired in: GPU work up to it may touch it
};

struct Expected {
  std::vector<JobId> completed;
  std::vector<std::pair<JobId, uint32_t>> failed;  // job, rank
};

class Simulation {
 public:
  explicit Simulation(uint64_t seed) : seed_(seed), random_(seed) {
    static const uint32_t kTp[] = {1, 2, 2, 4, 8};
    static const uint32_t kPp[] = {1, 1, 2, 3, 4};
    config_.tp = kTp[draw(5)];
    config_.pp = kPp[draw(5)];
    if (draw(40) == 0) config_.tp = 70;  // settled-rank bitsets of several words
    config_.chunks = 2 + static_cast<uint32_t>(draw(11));
    config_.max_jobs_in_flight = 1u << draw(4);
    waived_ = draw(7) == 0;
    config_.compute_barrier = waived_ ? ComputeBarrier::kWaived : ComputeBarrier::kRequired;
    scheduler_ = std::make_unique<OffloadScheduler>(config_);
    ranks_.resize(scheduler_->ranks());
    for (uint32_t r = 0; r < ranks_.size(); ++r) ranks_[r].pid = 1000 + r;
    chunks_.resize(config_.chunks);
    epoch_ = 1;
  }

  void run(int steps) {
    for (step_ = 0; step_ < steps; ++step_) {
      random_step();
      check_agreement();
    }
    finish();
  }

 private:
  uint64_t draw(uint64_t n) { return random_() % n; }
  bool chance(int one_in) { return draw(static_cast<uint64_t>(one_in)) == 0; }

  void fail(const std::string& what) const { FAIL("seed " << seed_ << " step " << step_ << ": " << what); }

  // ---- the random step ----

  void random_step() {
    switch (draw(20)) {
      case 0: case 1: case 2: dispatch(); break;
      case 3: case 4: case 5: worker_copy(); break;
      case 6: case 7: worker_compute(); break;
      case 8: case 9: case 10: case 11: deliver(static_cast<uint32_t>(draw(ranks_.size()))); break;
      case 12: retire(); break;
      case 13: begin_epoch(); break;
      case 14: take_reusable(); break;
      case 15: if (chance(3)) death(); break;
      case 16: exits(); break;
      case 17: bad_report(); break;
      case 18: heartbeat(); break;
      default: deliver_all(); break;
    }
  }

  bool all_live() const {
    return std::all_of(ranks_.begin(), ranks_.end(), [](const SimRank& r) { return r.state == RankLiveness::kLive; });
  }

  std::vector<ChunkId> active_chunks() const {
    std::vector<ChunkId> active;
    for (ChunkId c = 0; c < chunks_.size(); ++c) {
      if (!chunks_[c].retired) active.push_back(c);
    }
    return active;
  }

  size_t open_jobs() const { return jobs_.size(); }

  void dispatch() {
    std::vector<ChunkId> active = active_chunks();
    std::vector<ChunkId> chunks;
    size_t count = 1 + draw(3);
    bool bad = active.empty() || chance(25);
    for (size_t i = 0; i < count; ++i) {
      if (bad) {
        chunks.push_back(static_cast<ChunkId>(draw(config_.chunks + 1)));  // maybe retired, maybe out of range
      } else {
        chunks.push_back(active[draw(active.size())]);
      }
    }
    bool valid = all_live() && open_jobs() < scheduler_->quorum().capacity();
    for (ChunkId c : chunks) valid = valid && c < chunks_.size() && !chunks_[c].retired;
    JobKind kind = chance(2) ? JobKind::kLoad : JobKind::kStore;
    SchedulerFigures before = scheduler_->figures();
    if (!valid) {
      bool threw = false;
      try {
        scheduler_->dispatch(kind, chunks);
      } catch (const Error&) {
        threw = true;
      }
      SIM_CHECK(threw, "dispatch that must be refused was accepted");
      SIM_CHECK(scheduler_->figures().holds == before.holds, "a refused dispatch changed holds");
      return;
    }
    JobId job = scheduler_->dispatch(kind, chunks);
    SIM_CHECK(jobs_.count(job) == 0 && job > last_job_, "job ids must increase and be new");
    last_job_ = job;
    SimJob& sim = jobs_[job];
    sim.kind = kind;
    sim.chunks = chunks;
    sim.settled.assign(ranks_.size(), 0);
    sim.copied.assign(ranks_.size(), 0);
    // Sent: every process may start copying at once.
    for (SimRank& rank : ranks_) {
      if (rank.alive) rank.copying.insert(job);
    }
  }

  SimRank* random_process(uint32_t* index) {
    uint32_t r = static_cast<uint32_t>(draw(ranks_.size()));
    *index = r;
    SimRank& rank = ranks_[r];
    return rank.alive && rank.admitted ? &rank : nullptr;
  }

  void post(uint32_t r, ReportKind kind, uint64_t value, uint32_t flags = 0) {
    SimRank& rank = ranks_[r];
    Report report{};
    report.kind = kind;
    report.rank = static_cast<uint16_t>(r);
    report.flags = flags;
    report.sequence = rank.next_sequence++;
    report.value = value;
    rank.ring.push_back(report);
  }

  void worker_copy() {
    uint32_t r = 0;
    SimRank* rank = random_process(&r);
    if (rank == nullptr || rank->copying.empty()) return;
    auto it = rank->copying.begin();
    std::advance(it, static_cast<long>(draw(rank->copying.size())));
    JobId job = *it;
    rank->copying.erase(it);
    if (chance(15)) {
      post(r, ReportKind::kCopyFailed, job, 5);
    } else {
      jobs_.at(job).copied[r] = 1;
      post(r, ReportKind::kCopyComplete, job);
    }
  }

  void worker_compute() {
    uint32_t r = 0;
    SimRank* rank = random_process(&r);
    if (rank == nullptr || rank->done + 1 >= epoch_) return;
    rank->done += 1 + draw(epoch_ - 1 - rank->done);  // a release covers every earlier epoch
    post(r, ReportKind::kComputeRelease, rank->done);
  }

  void heartbeat() {
    uint32_t r = 0;
    SimRank* rank = random_process(&r);
    if (rank != nullptr) post(r, ReportKind::kHeartbeat, step_);
  }

  // ---- the rules, restated ----

  ReportVerdict expected_verdict(const Report& report) const {
    if (report.rank >= ranks_.size()) return ReportVerdict::kUnknownRank;
    const SimRank& rank = ranks_[report.rank];
    switch (report.kind) {
      case ReportKind::kCopyComplete: case ReportKind::kCopyFailed: case ReportKind::kComputeRelease:
      case ReportKind::kDetach: case ReportKind::kHeartbeat:
        break;
      case ReportKind::kAttach:
        if (rank.state == RankLiveness::kExited) {
          // The exited process's own attach, read late, is not a replacement.
          return report.value != 0 && report.value == rank.exited_pid ? ReportVerdict::kSequenceReplay
                                                                     : ReportVerdict::kApplied;
        }
        if (rank.state == RankLiveness::kUnresponsive) return ReportVerdict::kRankNotExited;
        if (report.sequence <= rank.last_sequence) return ReportVerdict::kSequenceReplay;
        // Another process on a live rank: refused, and the rank is no longer trusted.
        if (rank.known_pid != 0 && rank.known_pid != report.value) return ReportVerdict::kRankNotExited;
        return ReportVerdict::kApplied;
      default:
        return ReportVerdict::kUnknownKind;
    }
    if (rank.state != RankLiveness::kLive) return ReportVerdict::kRankNotLive;
    if (report.sequence <= rank.last_sequence) return ReportVerdict::kSequenceReplay;
    if (report.kind == ReportKind::kCopyComplete || report.kind == ReportKind::kCopyFailed) {
      auto job = jobs_.find(report.value);
      if (job == jobs_.end()) return ReportVerdict::kUnknownJob;
      if (job->second.settled[report.rank]) return ReportVerdict::kDuplicate;
    }
    if (report.kind == ReportKind::kComputeRelease) {
      if (report.value <= rank.released) return ReportVerdict::kEpochNotAdvancing;
      if (report.value >= epoch_) return ReportVerdict::kEpochNotClosed;
    }
    return ReportVerdict::kApplied;
  }

  void settle_if_done(JobId id) {
    SimJob& job = jobs_.at(id);
    if (std::count(job.settled.begin(), job.settled.end(), 0) != 0) return;
    if (!job.failed) {
      for (uint32_t r = 0; r < ranks_.size(); ++r) {
        SIM_CHECK(job.copied[r] != 0, "job ", id, " completed, but rank ", r, "'s process did not copy it");
      }
      expected_.completed.push_back(id);
    }
    jobs_.erase(id);
  }

  void expect_unresponsive(uint32_t r) {
    SimRank& rank = ranks_[r];
    if (rank.state != RankLiveness::kLive) return;
    rank.state = RankLiveness::kUnresponsive;
    for (auto& [id, job] : jobs_) {
      if (!job.settled[r] && !job.failed) {
        job.failed = true;
        expected_.failed.emplace_back(id, r);
      }
    }
  }

  void expect_exited(uint32_t r) {
    expect_unresponsive(r);
    if (ranks_[r].state != RankLiveness::kExited) ranks_[r].exited_pid = ranks_[r].known_pid;
    ranks_[r].state = RankLiveness::kExited;
    std::vector<JobId> ids;
    for (auto& [id, job] : jobs_) {
      if (!job.settled[r]) {
        job.settled[r] = 1;
        ids.push_back(id);
      }
    }
    for (JobId id : ids) settle_if_done(id);
  }

  void expect_applied(const Report& report) {
    SimRank& rank = ranks_[report.rank];
    switch (report.kind) {
      case ReportKind::kAttach:
        if (rank.state == RankLiveness::kExited) {  // a replacement: joins at current - 1
          rank.state = RankLiveness::kLive;
          rank.released = epoch_ - 1;
          if (rank.alive && !rank.admitted && rank.pid == report.value) {
            rank.admitted = true;
            rank.done = epoch_ - 1;  // it is given no GPU work of closed epochs
          }
        }
        rank.known_pid = report.value;
        break;
      case ReportKind::kCopyComplete:
      case ReportKind::kCopyFailed: {
        SimJob& job = jobs_.at(report.value);
        job.settled[report.rank] = 1;
        if (report.kind == ReportKind::kCopyFailed && !job.failed) {
          job.failed = true;
          expected_.failed.emplace_back(report.value, report.rank);
        }
        settle_if_done(report.value);
        break;
      }
      case ReportKind::kComputeRelease:
        rank.released = report.value;
        break;
      case ReportKind::kDetach:
        expect_unresponsive(report.rank);
        break;
      default:
        break;
    }
    rank.last_sequence = report.sequence;
  }

  // Applies a report and checks the verdict; a rejection must change nothing but its counter.
  void apply(const Report& report) {
    ReportVerdict expected = expected_verdict(report);
    // A refused attach from another process on a live rank makes the rank unresponsive.
    const bool foreign_attach = expected == ReportVerdict::kRankNotExited && report.kind == ReportKind::kAttach &&
                                ranks_[report.rank].state == RankLiveness::kLive;
    SchedulerFigures before = scheduler_->figures();
    ReportVerdict verdict = scheduler_->apply(report);
    SIM_CHECK(verdict == expected, "report kind ", static_cast<int>(report.kind), " rank ", report.rank, " value ",
                                   report.value, ": verdict ", verdict_name(verdict), ", expected ",
                                   verdict_name(expected));
    if (expected == ReportVerdict::kApplied) {
      expect_applied(report);
      return;
    }
    if (foreign_attach) {
      expect_unresponsive(report.rank);
      SIM_CHECK(scheduler_->rank_state(report.rank) == RankLiveness::kUnresponsive, "a foreign attach leaves the rank live");
      return;
    }
    SchedulerFigures after = scheduler_->figures();
    before.rejected_by_verdict[static_cast<size_t>(verdict)]++;
    SIM_CHECK(after.rejected_by_verdict == before.rejected_by_verdict, "rejections must be counted by reason");
    SIM_CHECK(after.reports_applied == before.reports_applied && after.holds == before.holds &&
              after.pinned_chunks == before.pinned_chunks && after.jobs_waiting_quorum == before.jobs_waiting_quorum &&
              after.jobs_failed == before.jobs_failed && after.all_rank_epoch == before.all_rank_epoch &&
              after.reusable_chunks == before.reusable_chunks && after.live_ranks == before.live_ranks, "a rejected report (", verdict_name(verdict), ") changed the scheduler");
  }

  void deliver(uint32_t r) {
    SimRank& rank = ranks_[r];
    if (rank.ring.empty()) return;
    Report report = rank.ring.front();
    rank.ring.pop_front();
    apply(report);
  }

  void deliver_all() {
    for (uint32_t r = 0; r < ranks_.size(); ++r) {
      while (!ranks_[r].ring.empty()) deliver(r);
    }
  }

  void retire() {
    ChunkId c = static_cast<ChunkId>(draw(chunks_.size()));
    if (chunks_[c].retired) {
      bool threw = false;
      try {
        scheduler_->retire(c);
      } catch (const Error&) {
        threw = true;
      }
      SIM_CHECK(threw, "retiring chunk ", c, " twice was accepted");
      return;
    }
    scheduler_->retire(c);
    chunks_[c].retired = true;
    chunks_[c].stamp = epoch_;
  }

  void begin_epoch() {
    SIM_CHECK(scheduler_->begin_epoch() == epoch_ + 1, "begin_epoch must open the next epoch");
    ++epoch_;
  }

  // The engine takes chunks back: nothing may be able to touch them.
  void take_reusable() {
    std::vector<ChunkId> out;
    scheduler_->take_reusable(&out);
    for (ChunkId c : out) {
      SIM_CHECK(chunks_[c].retired, "chunk ", c, " handed back without a retirement (released twice?)");
      SIM_CHECK(scheduler_->pins().holds(c) == 0, "chunk ", c, " handed back with holds");
      for (uint32_t r = 0; r < ranks_.size(); ++r) {
        const SimRank& rank = ranks_[r];
        if (!rank.alive) continue;
        for (JobId job : rank.copying) {
          // A process copies only jobs it has not reported, which stay open.
          SIM_CHECK(jobs_.count(job) != 0, "rank ", r, "'s process copies job ", job, ", which settled");
          const std::vector<ChunkId>& listed = jobs_.at(job).chunks;
          SIM_CHECK(std::find(listed.begin(), listed.end(), c) == listed.end(), "chunk ", c, " handed back while rank ", r, "'s process may still copy job ", job);
        }
        SIM_CHECK(waived_ || !rank.admitted || rank.done >= chunks_[c].stamp, "chunk ", c, " handed back before rank ", r, " finished epoch ", chunks_[c].stamp);
      }
      chunks_[c].retired = false;
    }
  }

  // ---- deaths ----

  void death() {
    uint32_t r = static_cast<uint32_t>(draw(ranks_.size()));
    SimRank& rank = ranks_[r];
    if (chance(2)) {
      // The caller's timeout fires (the process may be fine, hung, or gone).
      size_t failed_before = expected_.failed.size();
      bool was_live = rank.state == RankLiveness::kLive;
      expect_unresponsive(r);
      size_t failed = scheduler_->rank_unresponsive(r);
      SIM_CHECK(failed == (was_live ? expected_.failed.size() - failed_before : 0), "rank_unresponsive's count");
    } else if (chance(2)) {
      if (rank.alive && rank.admitted) post(r, ReportKind::kDetach, rank.pid);  // leaving: its ring says so
    } else if (rank.alive && rank.admitted) {
      crash(r);  // (a replacement not yet admitted does not die: one process per rank at a time)
    }
  }

  void crash(uint32_t r) {
    SimRank& rank = ranks_[r];
    rank.alive = false;
    rank.copying.clear();
  }

  void exits() {
    uint32_t r = static_cast<uint32_t>(draw(ranks_.size()));
    SimRank& rank = ranks_[r];
    if (rank.state == RankLiveness::kUnresponsive && rank.alive && chance(2)) {
      crash(r);  // killed
    } else if (!rank.alive && rank.state != RankLiveness::kExited && chance(2)) {
      expect_exited(r);  // the pidfd says it is gone
      scheduler_->rank_exited(r);
    } else if (!rank.alive && rank.state == RankLiveness::kExited && chance(2)) {
      replace(r);
    }
  }

  void replace(uint32_t r) {
    SimRank& rank = ranks_[r];
    rank.alive = true;
    rank.admitted = false;
    rank.copying.clear();
    rank.next_sequence = 1;
    rank.pid = next_pid_++;
    post(r, ReportKind::kAttach, rank.pid);
  }

  void bad_report() {
    Report report{};
    uint32_t r = static_cast<uint32_t>(draw(ranks_.size() + 1));
    report.rank = static_cast<uint16_t>(r);
    const SimRank* rank = r < ranks_.size() ? &ranks_[r] : nullptr;
    uint64_t last = rank != nullptr ? rank->last_sequence : 0;
    report.sequence = chance(3) ? last : last + 1 + draw(1000);
    switch (draw(6)) {
      case 0: report.kind = static_cast<ReportKind>(draw(2) == 0 ? 0 : 40); break;
      case 1: report.kind = ReportKind::kCopyComplete; report.value = last_job_ + 1 + draw(3); break;
      case 2: report.kind = ReportKind::kCopyComplete; report.value = last_job_ == 0 ? 0 : 1 + draw(last_job_); break;
      case 3: report.kind = ReportKind::kComputeRelease; report.value = draw(epoch_ + 2); break;
      case 4: report.kind = ReportKind::kAttach; report.value = 1 + draw(3); break;
      default: report.kind = ReportKind::kCopyFailed; report.value = draw(last_job_ + 1); break;
    }
    if (expected_verdict(report) == ReportVerdict::kApplied) return;  // not bad after all: skip it
    apply(report);
  }

  // ---- agreement after every step ----

  Epoch expected_all_rank_epoch() const {
    Epoch minimum = epoch_ - 1;
    for (const SimRank& rank : ranks_) {
      if (rank.state != RankLiveness::kExited) minimum = std::min(minimum, rank.released);
    }
    return minimum;
  }

  void check_agreement() {
    std::vector<JobId> completed;
    scheduler_->take_completed(&completed);
    SIM_CHECK(completed == expected_.completed, "completed jobs differ from the quorum rule");
    std::vector<FailedJob> failed;
    scheduler_->take_failed(&failed);
    SIM_CHECK(failed.size() == expected_.failed.size(), "failed jobs differ");
    for (size_t i = 0; i < failed.size() && i < expected_.failed.size(); ++i) {
      SIM_CHECK(failed[i].job == expected_.failed[i].first && failed[i].rank == expected_.failed[i].second, "failure ", i, ": job ", failed[i].job, " rank ", failed[i].rank);
      SIM_CHECK(failed[i].message.find(describe_rank(failed[i].rank, config_.tp)) != std::string::npos, "a failure must name the rank and its coordinates");
    }
    expected_ = Expected{};

    std::vector<uint32_t> holds(chunks_.size(), 0), quarantined(chunks_.size(), 0);
    uint32_t waiting = 0, failed_holding = 0;
    for (const auto& [id, job] : jobs_) {
      bool awaits_exit = false;
      for (uint32_t r = 0; r < ranks_.size(); ++r) {
        awaits_exit = awaits_exit || (!job.settled[r] && ranks_[r].state == RankLiveness::kUnresponsive);
      }
      for (ChunkId c : job.chunks) {
        ++holds[c];
        if (awaits_exit) ++quarantined[c];
      }
      (job.failed ? failed_holding : waiting)++;
    }
    Epoch all_rank = expected_all_rank_epoch();
    const CopyPins& pins = scheduler_->pins();
    for (ChunkId c = 0; c < chunks_.size(); ++c) {
      SIM_CHECK(pins.holds(c) == holds[c], "chunk ", c, " holds ", pins.holds(c), ", expected ", holds[c]);
      SIM_CHECK(pins.quarantined_holds(c) == quarantined[c], "chunk ", c, " quarantine differs");
      ChunkState expected = ChunkState::kActive;
      if (chunks_[c].retired) {
        bool passed = waived_ || all_rank >= chunks_[c].stamp;
        expected = !passed ? ChunkState::kRetired : holds[c] > 0 ? ChunkState::kFenced : ChunkState::kReusable;
      }
      SIM_CHECK(pins.state(c) == expected, "chunk ", c, " is ", chunk_state_name(pins.state(c)), ", expected ",
                                           chunk_state_name(expected));
    }
    SchedulerFigures figures = scheduler_->figures();
    SIM_CHECK(figures.all_rank_epoch == all_rank, "all-rank epoch ", figures.all_rank_epoch, ", expected ", all_rank);
    SIM_CHECK(figures.current_epoch == epoch_, "current epoch");
    SIM_CHECK(figures.jobs_waiting_quorum == waiting && figures.jobs_failed_holding == failed_holding, "job counts");
    uint32_t live = 0, unresponsive = 0, exited = 0;
    for (uint32_t r = 0; r < ranks_.size(); ++r) {
      SIM_CHECK(scheduler_->rank_state(r) == ranks_[r].state, "rank ", r, " state");
      live += ranks_[r].state == RankLiveness::kLive;
      unresponsive += ranks_[r].state == RankLiveness::kUnresponsive;
      exited += ranks_[r].state == RankLiveness::kExited;
    }
    SIM_CHECK(figures.live_ranks == live && figures.unresponsive_ranks == unresponsive && figures.exited_ranks == exited, "rank counts");
    SIM_CHECK(scheduler_->holds_clear() == (figures.holds == 0), "holds_clear");
  }

  // "epoch 7, all-rank 5; rank 0 live released 6 (process done 6) ...": for failure messages.
  std::string describe_ranks() const {
    std::string text = cat("epoch ", epoch_, ", all-rank ", scheduler_->all_rank_epoch());
    for (uint32_t r = 0; r < ranks_.size(); ++r) {
      const SimRank& rank = ranks_[r];
      text += cat("; rank ", r, " ", rank_liveness_name(rank.state), " released ", scheduler_->fence().released(r),
                  rank.alive ? cat(" (process done ", rank.done, rank.admitted ? ")" : ", not admitted)") : " (gone)");
    }
    return text;
  }

  // ---- the end: every process finishes, every retired chunk must come back ----

  void finish() {
    step_ = -1;
    deliver_all();
    check_agreement();
    for (uint32_t r = 0; r < ranks_.size(); ++r) {
      SimRank& rank = ranks_[r];
      if (rank.state == RankLiveness::kUnresponsive || !rank.alive) {
        if (rank.alive) crash(r);
        if (rank.state != RankLiveness::kExited) {
          expect_exited(r);
          scheduler_->rank_exited(r);
        }
      }
    }
    check_agreement();
    for (int round = 0; round < 2; ++round) {
      for (uint32_t r = 0; r < ranks_.size(); ++r) {
        SimRank& rank = ranks_[r];
        if (!rank.alive || !rank.admitted) continue;
        while (!rank.copying.empty()) {
          JobId job = *rank.copying.begin();
          rank.copying.erase(rank.copying.begin());
          jobs_.at(job).copied[r] = 1;
          post(r, ReportKind::kCopyComplete, job);
        }
      }
      deliver_all();
      begin_epoch();
      for (uint32_t r = 0; r < ranks_.size(); ++r) {
        SimRank& rank = ranks_[r];
        if (rank.alive && rank.admitted && rank.done + 1 < epoch_) {
          rank.done = epoch_ - 1;
          post(r, ReportKind::kComputeRelease, rank.done);
        }
      }
      deliver_all();
      check_agreement();
    }
    take_reusable();
    for (ChunkId c = 0; c < chunks_.size(); ++c) {
      SIM_CHECK(!chunks_[c].retired, "chunk ", c, " never came back: ", chunk_state_name(scheduler_->pins().state(c)),
                                     ", stamp ", chunks_[c].stamp, "; ", describe_ranks());
    }
    SIM_CHECK(jobs_.empty(), "jobs left open at the end");
    SIM_CHECK(scheduler_->quiescent(), "not quiescent at the end");
  }

  uint64_t seed_;
  std::mt19937_64 random_;
  SchedulerConfig config_;
  bool waived_ = false;
  std::unique_ptr<OffloadScheduler> scheduler_;
  std::vector<SimRank> ranks_;
  std::vector<SimChunk> chunks_;
  std::map<JobId, SimJob> jobs_;  // open in the scheduler: not every rank settled them
  Expected expected_;
  JobId last_job_ = 0;
  Epoch epoch_ = 1;
  uint64_t next_pid_ = 50000;
  int step_ = 0;
};

int seed_count() {
  const char* text = std::getenv("HUGEPIN_SIM_SEEDS");
  return text != nullptr ? std::max(1, std::atoi(text)) : 3000;
}

}  // namespace

TEST_CASE("random interleavings agree with the rules and never release a chunk that can be touched") {
  int seeds = seed_count();
  for (int seed = 1; seed <= seeds; ++seed) {
    Simulation simulation(static_cast<uint64_t>(seed));
    simulation.run(400);
  }
  MESSAGE(seeds << " seeds, 400 steps each, " << checks_made << " checks");
  CHECK(checks_made > uint64_t{1000} * static_cast<uint64_t>(seeds));
}

}  // namespace hugepin
