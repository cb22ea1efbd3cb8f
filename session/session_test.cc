// The two sessions together, over host memcpy: a scheduler and its workers (threads of this
// process, or forked processes where a process must die), the real control segment and rings.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/pattern.h"
#include "ipc/doorbell.h"
#include "ipc/test_arena.h"
#include "session/host_plan.h"
#include "session/scheduler_session.h"
#include "session/worker_session.h"
#include "tests/support/error_text.h"
#include "tests/support/fault_os.h"

namespace hugepin {
namespace {

using test::contains;
using test::error_of;

// TP 2 x PP 1, 4 blocks per chunk; rank 0 one segment of 256 bytes per block, rank 1 two of 128.
constexpr const char* kPlan = R"({"tp": 2, "pp": 1, "blocks_per_chunk": 4, "cpu_bytes": 65536, "page_size": "4K",
  "ranks": [
    {"tp_rank": 0, "pp_rank": 0, "num_blocks": 32, "bytes_per_block": 256},
    {"tp_rank": 1, "pp_rank": 0, "num_blocks": 32, "tensors": [
      {"name": "kv", "shape": [2, 32, 64], "strides": [2048, 64, 1], "element_size": 2, "storage": "kv"}]}]})";
constexpr uint64_t kDeviceBlocks = 32;

struct Cluster {
  explicit Cluster(ControlOptions control = {}, SchedulerSessionOptions options = {})
      : arena(test::unique_arena_name("session")),
        scheduler(SchedulerSession::create(real_os(), arena, plan_on_host(real_os(), kPlan), {}, options, control)) {}

  std::string arena;
  SchedulerSession scheduler;
};

// A worker's "device" KV: one host buffer per segment, blocks packed.
struct FakeDevice {
  explicit FakeDevice(const RankGeometry& rank) {
    for (const SegmentGeometry& segment : rank.segments) {
      buffers.emplace_back(kDeviceBlocks * segment.bytes_per_block);
      segments.push_back({reinterpret_cast<uintptr_t>(buffers.back().data()), segment.bytes_per_block, kDeviceBlocks,
                          segment.bytes_per_block});
    }
  }
  FakeDevice(const FakeDevice&) = delete;  // segments point into buffers
  FakeDevice& operator=(const FakeDevice&) = delete;
  std::byte* block(size_t segment, uint64_t index) {
    return buffers[segment].data() + index * segments[segment].bytes_per_block;
  }
  std::vector<std::vector<std::byte>> buffers;
  std::vector<DeviceSegment> segments;
};

uint64_t seed_of(uint32_t rank, uint64_t chunk, size_t segment, uint64_t block) {
  return mix64(rank * 1000003 + chunk * 1009 + segment * 101 + block);
}

// Drains until `job` completes or fails; true when it completed.
bool settle(SchedulerSession& scheduler, JobId job) {
  for (int i = 0; i < 500; ++i) {
    scheduler.drain(10'000'000);
    std::vector<JobId> done;
    scheduler.take_completed(&done);
    for (JobId id : done) {
      if (id == job) return true;
    }
    std::vector<FailedJob> failed;
    scheduler.take_failed(&failed);
    for (const FailedJob& f : failed) {
      if (f.job == job) return false;
    }
  }
  FAIL("job ", job, " neither completed nor failed in 5 s");
  return false;
}

TEST_CASE("stores and loads through both sessions: quorum, every byte, fence") {
  Cluster cluster;
  SchedulerSession& scheduler = cluster.scheduler;
  const ChunkGeometry& geometry = scheduler.geometry();
  REQUIRE(geometry.ranks() == 2);
  CHECK(geometry.rank(1).segments.size() == 2);

  WorkerSession w0(real_os(), cluster.arena, 0, 0);
  WorkerSession w1(real_os(), cluster.arena, 1, 0);
  WorkerSession* workers[] = {&w0, &w1};
  FakeDevice d0(w0.rank_geometry());
  FakeDevice d1(w1.rank_geometry());
  FakeDevice* devices[] = {&d0, &d1};
  for (uint32_t r = 0; r < 2; ++r) workers[r]->set_device_kv(devices[r]->segments, WorkerBackend::kAuto);

  // The model's output: every device block of slots 0..7 gets its stamped bytes.
  const std::vector<ChunkId> chunks{3, 5};
  for (uint32_t r = 0; r < 2; ++r) {
    for (size_t s = 0; s < devices[r]->segments.size(); ++s) {
      for (uint64_t b = 0; b < 8; ++b) {
        fill_pattern(devices[r]->block(s, b), devices[r]->segments[s].bytes_per_block, seed_of(r, chunks[b / 4], s, b % 4));
      }
    }
  }
  const JobId store = scheduler.dispatch(JobKind::kStore, chunks);
  const std::vector<uint64_t> slots{0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<BlockPair> pairs;
  geometry.append_job_pairs(Direction::kDeviceToHost, chunks, slots, &pairs);

  w0.store(store, pairs);
  CHECK(w0.wait(store, 0));  // the host engine copies before store() returns
  scheduler.drain(1'000'000);
  std::vector<JobId> done;
  scheduler.take_completed(&done);
  CHECK(done.empty());  // one rank of two reported
  CHECK(scheduler.protocol().figures().pinned_chunks == 2);

  w1.store(store, pairs);
  CHECK(settle(scheduler, store));
  CHECK(scheduler.protocol().figures().pinned_chunks == 0);

  // Every host byte is what the device held: read through the region, as another process would.
  for (uint32_t r = 0; r < 2; ++r) {
    const std::byte* region = workers[r]->region().base;
    for (size_t s = 0; s < geometry.rank(r).segments.size(); ++s) {
      for (size_t i = 0; i < chunks.size(); ++i) {
        for (uint64_t b = 0; b < 4; ++b) {
          const std::byte* block = region + geometry.host_block_offset(r, s, chunks[i], b);
          CHECK_FALSE(find_pattern_mismatch(block, geometry.rank(r).segments[s].bytes_per_block, seed_of(r, chunks[i], s, b)));
        }
      }
    }
  }

  // Load chunk 5 into slots 20..23 of each rank.
  for (FakeDevice* device : devices) {
    for (auto& buffer : device->buffers) std::memset(buffer.data(), 0, buffer.size());
  }
  const std::vector<ChunkId> one{5};
  const JobId load = scheduler.dispatch(JobKind::kLoad, one);
  pairs.clear();
  geometry.append_chunk_pairs(Direction::kHostToDevice, 5, 20, &pairs);
  for (WorkerSession* worker : workers) worker->load(load, pairs);
  CHECK(settle(scheduler, load));
  for (uint32_t r = 0; r < 2; ++r) {
    for (size_t s = 0; s < devices[r]->segments.size(); ++s) {
      for (uint64_t b = 0; b < 4; ++b) {
        CHECK_FALSE(find_pattern_mismatch(devices[r]->block(s, 20 + b), devices[r]->segments[s].bytes_per_block,
                                          seed_of(r, 5, s, b)));
      }
    }
  }

  // What each worker saw land, with bytes.
  std::vector<JobResult> results;
  CHECK(w1.take_finished(&results) == 2);
  CHECK(results[0].job == store);
  CHECK(results[0].kind == JobKind::kStore);
  CHECK(results[0].bytes == 8 * 256);
  CHECK(results[1].job == load);
  CHECK(results[1].landed_ns >= results[1].launch_ns);
  CHECK(w1.take_finished(&results) == 0);

  // Retire and fence: reusable only when both ranks released the epoch of the retirement.
  scheduler.retire(3);
  scheduler.retire(5);
  const Epoch retired_in = scheduler.begin_epoch() - 1;
  std::vector<ChunkId> reusable;
  scheduler.drain(1'000'000);
  scheduler.take_reusable(&reusable);
  CHECK(reusable.empty());
  w0.release(retired_in);
  scheduler.drain(1'000'000);
  scheduler.take_reusable(&reusable);
  CHECK(reusable.empty());
  w1.release(retired_in);
  scheduler.drain(1'000'000);
  scheduler.take_reusable(&reusable);
  CHECK(reusable.size() == 2);
  CHECK(scheduler.protocol().figures().reports_rejected == 0);
}

TEST_CASE("bad requests to a worker change nothing and post nothing") {
  Cluster cluster;
  WorkerSession worker(real_os(), cluster.arena, 0, 0);
  const std::vector<BlockPair> pairs{{0, 1}};
  CHECK(contains(error_of([&] { worker.store(1, pairs); }), "no device KV yet"));
  FakeDevice device(worker.rank_geometry());
  worker.set_device_kv(device.segments, WorkerBackend::kHost);
  const uint64_t posted = cluster.scheduler.control().segment().view().rings[0]->produced();

  const std::vector<BlockPair> out_of_range{{0, 1}, {kDeviceBlocks, 2}};
  try {
    worker.store(1, out_of_range);
    FAIL("a pair out of range was accepted");
  } catch (const Error& error) {
    CHECK(error.errno_value() == ERANGE);
    CHECK(contains(error.what(), "pair 1"));
  }
  CHECK(contains(error_of([&] { worker.store(0, pairs); }), "job id 0"));
  worker.store(7, pairs);
  CHECK(contains(error_of([&] { worker.load(7, pairs); }), "job 7 is already launched here"));
  CHECK(worker.in_flight() == 0);
  CHECK(contains(error_of([&] { worker.wait(99, 0); }), "job 99 was never launched here"));
  worker.release(4);
  CHECK(contains(error_of([&] { worker.release(4); }), "release of epoch 4 after epoch 4"));
  // Posted: kAttach (before), the store of job 7, the release of epoch 4; nothing else.
  CHECK(cluster.scheduler.control().segment().view().rings[0]->produced() == posted + 2);

  const std::vector<DeviceSegment> wrong{{device.segments[0].device_base, 512, kDeviceBlocks, 512}};
  CHECK(contains(error_of([&] { worker.set_device_kv(wrong, WorkerBackend::kHost); }),
                 "bytes_per_block = 512, but the arena holds 256"));
  if (cuda_runtime() == nullptr) {
    CHECK(contains(error_of([&] { worker.pin(0); }), "built without CUDA"));
  }
  CHECK(contains(error_of([&] { worker.set_device_kv(device.segments, WorkerBackend::kGpu); }), "pinned first"));
}

TEST_CASE("the scheduler session refuses bad requests with their errno") {
  Cluster cluster;
  SchedulerSession& scheduler = cluster.scheduler;
  auto errno_of = [](const std::function<void()>& call) {
    try {
      call();
    } catch (const Error& error) {
      return error.errno_value();
    }
    return 0;
  };
  const ChunkId last = static_cast<ChunkId>(scheduler.geometry().chunk_count() - 1);
  CHECK(errno_of([&] { scheduler.dispatch(JobKind::kStore, {}); }) == EINVAL);
  const std::vector<ChunkId> beyond{last + 1};
  CHECK(errno_of([&] { scheduler.dispatch(JobKind::kStore, beyond); }) == ERANGE);
  CHECK(errno_of([&] { scheduler.retire(last + 1); }) == ERANGE);
  scheduler.retire(last);
  CHECK(errno_of([&] { scheduler.retire(last); }) == EINVAL);
  const std::vector<ChunkId> retired{last};
  CHECK(errno_of([&] { scheduler.dispatch(JobKind::kStore, retired); }) == EBUSY);
  CHECK(scheduler.protocol().figures().jobs_dispatched == 0);
  CHECK(errno_of([&] { SchedulerSession::adopt(real_os(), cluster.arena, {}); }) == EBUSY);
  CHECK(errno_of([&] { SchedulerSession::adopt(real_os(), "no-such-arena-here", {}); }) == ENOENT);
  CHECK(errno_of([&] { WorkerSession(real_os(), cluster.arena, 2, 0); }) == ERANGE);
}

TEST_CASE("a full ring loses no report: the backlog posts them as the scheduler drains") {
  ControlOptions control;
  control.ring_capacity = 4;
  Cluster cluster(control);
  SchedulerSession& scheduler = cluster.scheduler;
  WorkerSession w0(real_os(), cluster.arena, 0, 0);
  WorkerSession w1(real_os(), cluster.arena, 1, 0);
  FakeDevice d0(w0.rank_geometry());
  FakeDevice d1(w1.rank_geometry());
  w0.set_device_kv(d0.segments, WorkerBackend::kHost);
  w1.set_device_kv(d1.segments, WorkerBackend::kHost);
  const uint64_t chunks = scheduler.geometry().chunk_count();
  std::vector<JobId> jobs;
  for (ChunkId c = 0; c < chunks; ++c) {
    const std::vector<ChunkId> one{c};
    jobs.push_back(scheduler.dispatch(JobKind::kStore, one));
    std::vector<BlockPair> pairs;
    scheduler.geometry().append_chunk_pairs(Direction::kDeviceToHost, c, 0, &pairs);
    w0.store(jobs.back(), pairs);  // far more reports than the ring holds, nobody draining
    w1.store(jobs.back(), pairs);
  }
  REQUIRE(jobs.size() > 8);
  std::vector<JobId> done;
  for (int i = 0; i < 500 && done.size() < jobs.size(); ++i) {
    scheduler.drain(10'000'000);
    scheduler.take_completed(&done);
  }
  CHECK(done == jobs);  // every one, in order
  CHECK(scheduler.protocol().figures().reports_rejected == 0);
}

// Counts the wake-ups a worker asks the kernel for.
class WakeCountingOs : public test::ForwardingOs {
 public:
  WakeCountingOs() : ForwardingOs(real_os()) {}
  int futex_wake(const std::atomic<uint32_t>* word, int count) override {
    wakes.fetch_add(1);
    return ForwardingOs::futex_wake(word, count);
  }
  std::atomic<int> wakes{0};
};

// Two ranks on the host backend whose wake-up calls are counted, attached to a fresh arena whose
// scheduler has taken their attach reports; a read-only view of the control segment to watch it.
struct CountedRanks {
  Cluster cluster;
  SchedulerSession& scheduler = cluster.scheduler;
  WakeCountingOs os;
  WorkerSession w0{os, cluster.arena, 0, 0};
  WorkerSession w1{os, cluster.arena, 1, 0};
  FakeDevice d0{w0.rank_geometry()};
  FakeDevice d1{w1.rank_geometry()};
  ControlSegment segment = ControlSegment::open(real_os(), cluster.arena, SegmentAccess::kReadOnly);

  CountedRanks() {
    w0.set_device_kv(d0.segments, WorkerBackend::kHost);
    w1.set_device_kv(d1.segments, WorkerBackend::kHost);
    scheduler.drain(0);  // the attach reports
  }
  std::vector<BlockPair> store_pairs(ChunkId chunk) const {
    std::vector<BlockPair> pairs;
    scheduler.geometry().append_chunk_pairs(Direction::kDeviceToHost, chunk, 0, &pairs);
    return pairs;
  }
  void wait_until_asleep() const {
    while (segment.view().gate->sleepers.load() == 0) std::this_thread::yield();
  }
  // Waits until the drain has applied every report posted so far and sleeps again: each ring's
  // consumed count caught up, then a sleeper on the gate (a drain goes back to sleep only after
  // it consumed, so the two together cannot be the sleep it left).
  void wait_until_applied_and_asleep() const {
    for (const ReportRing* ring : segment.view().rings) {
      while (ring->consumed() != ring->produced()) std::this_thread::yield();
    }
    wait_until_asleep();
  }
};

// Records the timer slack of the last futex sleep; forwards everything to the real system.
class SlackRecordingOs : public test::ForwardingOs {
 public:
  SlackRecordingOs() : ForwardingOs(real_os()) {}
  int futex_wait(const std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns, int64_t slack_ns) override {
    last_slack_ns = slack_ns;
    return ForwardingOs::futex_wait(word, expected, timeout_ns, slack_ns);
  }
  std::atomic<int64_t> last_slack_ns{-1};
};

TEST_CASE("drain's sleeps carry the session's timer slack, and its timeout still ends them") {
  for (const int64_t slack : {int64_t{0}, int64_t{4'000'000}}) {
    CAPTURE(slack);
    SlackRecordingOs os;
    SchedulerSessionOptions options;
    options.wait_timer_slack_ns = slack;
    SchedulerSession scheduler = SchedulerSession::create(os, test::unique_arena_name("slack"),
                                                          plan_on_host(real_os(), kPlan), {}, options);
    CHECK(scheduler.drain(1'000'000) == 0);  // no rank: nothing comes, the timer ends the sleep
    CHECK(os.last_slack_ns == slack);
    CHECK(scheduler.gate_waits().timed_out >= 1);
  }
}

TEST_CASE("a sleeping drain is woken once a job can settle, not by each rank's report") {
  CountedRanks r;
  const JobId job = r.scheduler.dispatch(JobKind::kStore, std::vector<ChunkId>{2});
  const std::vector<BlockPair> pairs = r.store_pairs(2);
  std::vector<JobId> done;
  std::thread drainer([&] {
    for (int i = 0; i < 10 && done.empty(); ++i) {
      r.scheduler.drain(20'000'000'000);  // a lost wake-up would show as a missing one below
      r.scheduler.take_completed(&done);
    }
  });
  r.wait_until_asleep();  // waiting for both ranks' reports
  r.w0.store(job, pairs);
  REQUIRE(r.w0.wait(job, -1));  // its report is on the ring and counted
  CHECK(r.os.wakes == 0);  // one report of two: the scheduler sleeps on
  r.w1.store(job, pairs);
  drainer.join();
  CHECK(done == std::vector<JobId>{job});
  CHECK(r.os.wakes == 1);
}

TEST_CASE("jobs in flight: a report that leaves every job a report short does not wake the drain") {
  // Before the job tallies, the drain slept until "the fewest reports any job still needs" were
  // counted: here 2, so rank 1's report of job b woke it although neither job could settle.
  CountedRanks r;
  const JobId a = r.scheduler.dispatch(JobKind::kStore, std::vector<ChunkId>{2});
  const JobId b = r.scheduler.dispatch(JobKind::kStore, std::vector<ChunkId>{3});
  const std::vector<BlockPair> pairs_a = r.store_pairs(2);
  const std::vector<BlockPair> pairs_b = r.store_pairs(3);
  std::vector<JobId> done;
  std::thread drainer([&] {
    for (int i = 0; i < 10 && done.size() < 2; ++i) {
      r.scheduler.drain(20'000'000'000);  // a lost wake-up would show as a missing one below
      r.scheduler.take_completed(&done);
    }
  });
  r.wait_until_asleep();
  r.w0.store(a, pairs_a);
  REQUIRE(r.w0.wait(a, -1));
  r.w1.store(b, pairs_b);
  REQUIRE(r.w1.wait(b, -1));
  CHECK(r.os.wakes == 0);  // each job one report short: the scheduler sleeps on
  CHECK(r.segment.view().gate->sleepers.load() == 1);
  r.w1.store(a, pairs_a);  // job a can settle
  REQUIRE(r.w1.wait(a, -1));
  r.wait_until_applied_and_asleep();
  CHECK(r.os.wakes == 1);
  r.w0.store(b, pairs_b);  // then job b
  drainer.join();
  std::sort(done.begin(), done.end());
  CHECK(done == std::vector<JobId>{a, b});
  CHECK(r.os.wakes == 2);  // once per job: a lost wake-up would leave it at 1
}

TEST_CASE("a job that failed on one rank wakes the drain again when its last rank reports") {
  CountedRanks r;
  const JobId job = r.scheduler.dispatch(JobKind::kStore, std::vector<ChunkId>{2});
  std::vector<FailedJob> failed;
  std::thread drainer([&] {
    // Until the job settled (its chunk no longer pinned), not only failed.
    for (int i = 0; i < 10 && (failed.empty() || !r.scheduler.protocol().holds_clear()); ++i) {
      r.scheduler.drain(20'000'000'000);
      r.scheduler.take_failed(&failed);
    }
  });
  r.wait_until_asleep();
  r.w0.post_job_done(job, EIO);  // rank 0 refused it: urgent, the job fails
  r.wait_until_applied_and_asleep();
  CHECK(r.os.wakes == 1);
  r.w1.store(job, r.store_pairs(2));  // rank 1's copy was already out: its report settles the job
  drainer.join();
  REQUIRE(failed.size() == 1);
  CHECK(failed[0].job == job);
  CHECK(r.scheduler.protocol().holds_clear());
  CHECK(r.os.wakes == 2);  // without copy-failed ticking the tally, the last report woke nobody
}

// A rank of a one-rank arena that times its copies (one job in `every`), on the host backend.
struct TimedHostWorker {
  static WorkerSessionOptions timed(uint32_t every) {
    WorkerSessionOptions options;
    options.time_copies = true;
    options.time_copies_every = every;
    return options;
  }
  explicit TimedHostWorker(uint32_t every = 1)
      : worker(real_os(), cluster.arena, 0, 0, timed(every)), device(worker.rank_geometry()) {
    worker.set_device_kv(device.segments, WorkerBackend::kHost);
  }
  Cluster cluster;
  WorkerSession worker;
  FakeDevice device;
};

TEST_CASE("the completion descriptor turns readable when a job lands; timed jobs say how long they took") {
  TimedHostWorker rank;
  WorkerSession& worker = rank.worker;
  const int fd = worker.completion_fd();
  uint64_t count = 0;
  CHECK(::read(fd, &count, sizeof count) == -1);  // nothing landed yet
  const std::vector<BlockPair> pairs{{0, 0}};
  worker.store(1, pairs);
  CHECK(::read(fd, &count, sizeof count) == sizeof count);
  CHECK(count == 1);
  std::vector<JobResult> results;
  REQUIRE(worker.take_finished(&results) == 1);
  CHECK(results[0].copy_ns >= 0);
  CHECK(results[0].gpu_done_ns >= results[0].launch_ns);
  CHECK(results[0].gpu_done_ns <= results[0].landed_ns);
}

TEST_CASE("a timing that cannot be read costs the timing, never the job's result") {
  TimedHostWorker rank;
  WorkerSession& worker = rank.worker;
  const std::vector<BlockPair> pairs{{0, 0}};
  worker.store(1, pairs);  // the host engine's marks 1 and 2
  worker.store(2, pairs);  // 3 and 4
  (void)worker.engine().span(1, 2);  // job 1's marks read behind the session's back: its span fails
  std::vector<JobResult> results;
  REQUIRE(worker.take_finished(&results) == 2);
  CHECK(results[0].job == 1);
  CHECK(results[0].copy_ns == 0);
  CHECK(results[0].gpu_done_ns == 0);
  CHECK(results[1].job == 2);
  CHECK(results[1].gpu_done_ns >= results[1].launch_ns);
  CHECK(worker.take_finished(&results) == 0);
}

TEST_CASE("time_copies_every times the jobs copies_timed() picks, and only those") {
  TimedHostWorker rank(3);
  WorkerSession& worker = rank.worker;
  const std::vector<BlockPair> pairs{{0, 0}};
  for (JobId job = 1; job <= 30; ++job) worker.store(job, pairs);
  std::vector<JobResult> results;
  REQUIRE(worker.take_finished(&results) == 30);
  size_t timed = 0;
  for (const JobResult& result : results) {
    CAPTURE(result.job);
    if (copies_timed(result.job, 3)) {
      ++timed;
      CHECK(result.gpu_done_ns >= result.launch_ns);
    } else {
      CHECK(result.gpu_done_ns == 0);
      CHECK(result.copy_ns == 0);
    }
  }
  CHECK(timed > 0);
  CHECK(timed < 30);
}

TEST_CASE("copies_timed: one job in N, both parities of consecutive ids, every job for 0 and 1") {
  // A scheduler that alternates stores and loads gives them ids of alternating parity: a sample
  // must hold both.
  size_t odd = 0;
  size_t even = 0;
  for (JobId job = 1; job <= 8000; ++job) {
    if (!copies_timed(job, 8)) continue;
    ++(job % 2 == 0 ? even : odd);
  }
  CHECK(odd + even > 800);
  CHECK(odd + even < 1200);
  CHECK(odd > 300);
  CHECK(even > 300);
  for (JobId job = 1; job <= 100; ++job) {
    CHECK(copies_timed(job, 0));
    CHECK(copies_timed(job, 1));
  }
}

TEST_CASE("a worker killed mid-job: the job fails, its chunks stay held until the process is gone") {
  Cluster cluster;
  SchedulerSession& scheduler = cluster.scheduler;
  WorkerSession w0(real_os(), cluster.arena, 0, 0);
  FakeDevice d0(w0.rank_geometry());
  w0.set_device_kv(d0.segments, WorkerBackend::kHost);

  int go[2];
  REQUIRE(::pipe(go) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // rank 1: attaches, then waits forever for a job it will never finish
    try {
      WorkerSession w1(real_os(), cluster.arena, 1, 0);
      char byte = 'a';
      if (::write(go[1], &byte, 1) != 1) _exit(2);
      pause();
    } catch (...) {
    }
    _exit(1);
  }
  char byte = 0;
  REQUIRE(::read(go[0], &byte, 1) == 1);
  scheduler.drain(10'000'000);  // the child's kAttach: its process is now watched

  const std::vector<ChunkId> chunks{2};
  const JobId job = scheduler.dispatch(JobKind::kStore, chunks);
  std::vector<BlockPair> pairs;
  scheduler.geometry().append_chunk_pairs(Direction::kDeviceToHost, 2, 0, &pairs);
  w0.store(job, pairs);
  scheduler.drain(10'000'000);
  CHECK(scheduler.protocol().figures().pinned_chunks == 1);

  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(settle(scheduler, job) == false);
  std::vector<RankExit> exits;
  scheduler.take_rank_exits(&exits);
  REQUIRE(exits.size() == 1);
  CHECK(exits[0].rank == 1);
  CHECK(exits[0].pid == static_cast<uint64_t>(child));
  CHECK(exits[0].jobs_failed == 1);
  // Gone: the chunk's hold is released; the failed store's chunk comes back through retire.
  CHECK(scheduler.protocol().figures().pinned_chunks == 0);
  scheduler.retire(2);
  ::close(go[0]);
  ::close(go[1]);
}

}  // namespace
}  // namespace hugepin
