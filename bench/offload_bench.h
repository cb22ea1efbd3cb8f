// `hugepin bench offload`: the whole offload path at engine speed, beside the copy engine alone
// and beside the way engines report completions now, in the same worker processes.
//
// TP x PP rank processes (cli/engine: the demo's plan, whose pipeline stages hold unequal
// payloads), one arena, the scheduler in this process. For each block size and each mix (mixed,
// store-only, load-only), three rows, one after the other:
//   copy engine  every rank copies random chunks on its copy engine for `seconds`, `jobs_in_flight`
//                launches out at a time: no jobs, no reports. The ceiling.
//   hugepin      the scheduler dispatches jobs (SchedulerSession: copy pins), sends them to every
//                rank (the engine's own channel), the ranks copy through their WorkerSession,
//                which posts each report from the copy's completion; the scheduler drains the
//                rings (quorum), retires evicted chunks, steps epochs, takes chunks back through
//                the fence.
//   engine way   the same jobs and chunks; each rank polls its copies' CUDA events every
//                poll_interval while any is out and sends completions over its Unix socket; the
//                scheduler counts them to quorum in a hash map (vLLM: get_finished ->
//                KVOutputAggregator; Dynamo: ZMQ acks). No pins, no fence.
// The timed part moves data only. Correctness is checked outside it: every GPU slot is stamped
// before a row, the scheduler tracks which slot's stamp each chunk and slot holds, and after the
// row a sample of host chunks (read from every rank's region) and GPU slots (read by the ranks)
// must hold exactly that; a mismatch fails the run.
//
// Latency: settle = dispatch -> quorum seen by the scheduler. copy = the job's own GPU time (the
// longest rank's, from timing events around its copies). overhead = quorum seen - the moment the
// last rank's copies ended on the GPU (its end event on CLOCK_MONOTONIC): what reporting and
// quorum add, whatever queued ahead of the job. Copy and overhead come from the jobs both
// protocol rows time, one in time_every. CPU: the scheduler thread's CPU time inside the
// protocol's calls (hugepin: dispatch, drain, retire, fence; engine way: waiting for, receiving
// and counting completions), each call timed by the thread's CPU clock, less what the clock reads
// themselves cost (measured before each row); not the engine's own job delivery (the sends, the
// same in both rows) nor the benchmark's driver (its cache model and bookkeeping), which the loop
// CPU figure includes. Sleeps: the scheduler thread's voluntary context switches per job (when it
// collects once per step, collect_every_ns, the steps' own sleeps included).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/offload_messages.h"
#include "session/scheduler_session.h"

namespace hugepin::bench {

struct OffloadBenchOptions {
  uint32_t tp = 2;
  uint32_t pp = 2;
  // Bytes of one block in one segment on even pipeline stages (odd stages hold half): multiples
  // of 8 KiB (the plan's heads of 16 tokens x 128 bf16 values).
  std::vector<uint64_t> block_bytes{16 << 10, 64 << 10};
  std::vector<Mix> mixes{Mix::kMixed, Mix::kStore, Mix::kLoad};
  std::string backend = "auto";  // auto (GPU when one answers), gpu, host
  double seconds = 2;            // per row
  uint32_t jobs_in_flight = 8;
  uint32_t chunks_per_job = 4;
  uint64_t cpu_bytes = uint64_t{1} << 30;  // host KV over all ranks
  uint64_t blocks_per_chunk = 16;
  // The chunk cache evicts idle stored chunks while fewer than this share of all chunks are free
  // or on their way back, and never keeps fewer than the jobs in flight could take twice over
  // (2 x jobs_in_flight x chunks_per_job). hugepin's evicted chunks come back through the
  // retirement fence (an epoch step and the copies launched before it later), so a cache that
  // evicts only at that floor runs out of free chunks while they are away: on the H200 host its
  // 16 KiB store rows had fewer jobs out than asked for 23-26% of the time (34-40% under MPS,
  // where they lost 2-4% of their GB/s to it); at a quarter, never (docs/performance.md).
  double keep_free_share = 0.25;
  // Both protocol rows time the copies of one job in this many (timing events before and after
  // them on every rank; chosen by job id), the source of the copy and overhead columns. Timing
  // events slow the copies they sit between: on the H200 host, with them around every launch the
  // copy engine row moved 24-27% less at 16 KiB mixed, 11% at 16 KiB store, 3-4% at 64 KiB store;
  // under MPS, timing every job cost both protocol rows 14-25% in the mixed rows against one in 8
  // (docs/performance.md). 1 times every job, as vLLM's CPU offloading handler does.
  uint32_t time_every = 8;
  int64_t poll_interval_ns = 50'000;  // the engine way's event polling
  int64_t step_ns = 2'000'000;        // the hugepin row's compute epochs
  // The ranks' CUDA engines: 0, completion calls wait asleep on their events; > 0, they poll
  // them this often (CopyEngineOptions::completion_poll_ns).
  int64_t completion_poll_ns = 0;
  // Both protocol rows' ranks look at their copies' events back to back while any is out, instead
  // of sleeping between looks (hugepin: CopyEngineOptions::completion_spin; the engine way: ppoll
  // with no timeout): a CPU core per rank while copies are out, for the shortest LANDED.
  bool spin = false;
  // How the protocol rows' scheduler learns of settled jobs. 0: it sleeps until one can settle
  // (hugepin: drain with a timeout, on the report gate; engine way: ppoll on the sockets). > 0: it
  // looks once every this many ns without waiting (drain(0); ppoll with no timeout), as an engine
  // does once per step (vLLM's connector collects in get_finished), and sends the next jobs then;
  // between looks the thread sleeps, as an engine's would run the model, outside the protocol's
  // CPU figure.
  int64_t collect_every_ns = 0;
  // When it sleeps until a job can settle, how long each wait may last when nothing wakes it (jobs
  // wake it: the timeout is a backstop, and it paces the compute epochs when no job settles).
  int64_t collect_timeout_ns = 1'000'000;
  // ... and how late that timeout may end a sleep in which nothing happened (0: the thread's timer
  // slack, 50 us by default): the timer slack of the scheduler's waits in both protocol rows
  // (hugepin: SchedulerSessionOptions::wait_timer_slack_ns; the engine way: the thread's slack
  // around ppoll).
  int64_t wait_slack_ns = 0;
  // Called at every step; throws to stop the run (Ctrl-C). The arena and the ranks go as it unwinds.
  std::function<void()> check_interrupted = [] {};
};

enum class OffloadPath : uint8_t { kCopyEngine = 0, kHugepin = 1, kEngineWay = 2 };
const char* path_name(OffloadPath path);  // "copy engine", "hugepin", "engine way"
const char* mix_name(Mix mix);            // "mixed", "store", "load"
// Parses "mixed", "store", "load"; throws Error naming the text.
Mix parse_mix(const std::string& text);

// The rank processes' threads of one name over a row (all ranks together): CPU time and time
// spent runnable but waiting for a CPU, from /proc/PID/task/TID/schedstat (ns). Names with a
// trailing number lose it (the CUDA driver numbers its threads), so that like threads add up.
struct RankThreadGroup {
  std::string name;
  uint32_t threads = 0;                // alive at the row's end
  double cpu_us_per_job = 0;
  double run_queue_wait_us_per_job = 0;
};

struct OffloadRow {
  uint64_t block_bytes = 0;
  Mix mix = Mix::kMixed;
  OffloadPath path = OffloadPath::kCopyEngine;
  double seconds = 0;
  uint64_t jobs = 0;   // settled in the timed part (copy engine: launches per rank, summed)
  uint64_t timed_jobs = 0;  // of those, the ones whose copies were timed (time_every): copy, overhead
  uint64_t bytes = 0;  // moved in the timed part, all ranks
  double gb_per_second = 0;
  double of_ceiling = 0;  // gb_per_second / the copy engine's row of the same block and mix
  double settle_p50_us = 0, settle_p99_us = 0;
  double copy_p50_us = 0;
  double overhead_p50_us = 0, overhead_p99_us = 0;
  // The overhead's two parts: GPU end -> the last rank knows its copies landed (hugepin: its
  // completion call ran; engine way: its poll found the event done), and -> quorum seen.
  double landed_p50_us = 0, landed_p99_us = 0;
  double seen_p50_us = 0, seen_p99_us = 0;
  // The error bar on every GPU end above: each is right to within half of its calibration's
  // window (CopyEngine::MarkSpan::end_window_ns; per timed job, the widest over its ranks).
  double clock_window_p50_us = 0, clock_window_max_us = 0;
  // Each rank's own window at the median, rank order; empty for a rank that timed no job.
  std::vector<std::optional<double>> rank_clock_window_p50_us;
  // Timed jobs whose last rank knew its copies landed more than half a window before their GPU end
  // as placed: the clock's error bars broken. 0 when they hold.
  uint64_t clock_early_jobs = 0;
  double cpu_us_per_job = 0;        // the scheduler thread's inside the protocol's calls
  double cpu_us_per_job_rank = 0;   // the same per rank
  double loop_cpu_us_per_job = 0;   // the whole scheduler thread's, the benchmark's driver too
  double sleeps_per_job = 0;        // times the scheduler thread went to sleep, per job
  double ranks_cpu_us_per_job = 0;  // every rank process's CPU (all threads), summed, per job
  // Jobs out at once, averaged over the window (at most jobs_in_flight), and the share of the
  // window with fewer out because the chunk cache could make no job: hugepin's evicted chunks come
  // back only through the retirement fence, the engine way's at once.
  double mean_jobs_in_flight = 0;
  double no_job_share = 0;
  std::vector<RankThreadGroup> rank_threads;  // the same by thread name (protocol rows), most CPU first
  double reports_per_second = 0;    // reports the scheduler took (engine way: completions)
  // Where the slowest SEEN times went (protocol rows; bench/scheduler_stalls.h), about the timed
  // jobs whose SEEN is at or above its p99 (none when no job was timed): the share of their SEEN
  // that the scheduler thread spent outside its collect calls (busy elsewhere, or not running
  // though not queued for a CPU); the share of them seen by a collect call whose wait ran out
  // (nothing woke the scheduler for them; waking per job only); each of them. And over the window:
  // the longest stretch outside collect calls; the scheduler thread's time runnable but not
  // running, per job (none when the kernel does not keep it); collect calls whose wait ran out
  // (waking per job only); the machine's steal time, a share of all its CPU time, idle included.
  struct LateSeen {
    double seen_us = 0;
    double outside_collect_us = 0;
    std::optional<double> collect_call_us;  // how long the collect call that saw its quorum lasted
  };
  std::vector<LateSeen> late_seen;  // slowest first
  std::optional<double> late_seen_busy_share;
  std::optional<double> late_seen_after_timeout_share;
  double longest_outside_collect_us = 0;
  std::optional<double> scheduler_run_queue_wait_us_per_job;
  std::optional<uint64_t> collect_timeouts;
  double steal_share = 0;
  // hugepin only: how the scheduler's sleeps on the report gate ended in the window
  // (session/scheduler_session.h: GateWaitCounts; none for the engine way).
  std::optional<GateWaitCounts> gate_waits;
  uint64_t chunks_checked = 0;      // host chunk copies checked after the row, over ranks
  uint64_t slots_checked = 0;       // GPU slots checked after the row, over ranks
};

struct OffloadBenchResult {
  bool gpu = false;
  int gpus = 0;
  uint32_t ranks = 0;
  std::vector<uint64_t> chunk_counts;  // per block size: the plan's chunk count
  std::vector<OffloadRow> rows;
  uint64_t chunks_checked = 0;
  uint64_t slots_checked = 0;
};

// Throws Error naming the option out of range.
void check_offload_bench_options(const OffloadBenchOptions& options);

// Runs every block size, mix and path. Throws Error when a check fails (a wrong byte, a failed
// job, a rank that died), naming what was wrong. Calls `progress` before each row.
OffloadBenchResult run_offload_bench(const OffloadBenchOptions& options,
                                     const std::function<void(const std::string&)>& progress);

}  // namespace hugepin::bench
