#include "bench/offload_worker.h"

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <thread>

#include "base/os.h"
#include "base/parallel.h"
#include "bench/offload_messages.h"
#include "cli/engine/device_kv.h"
#include "cli/engine/kv_stamp.h"
#include "dma/copy_engine.h"
#include "session/worker_session.h"

namespace hugepin::bench {
namespace {

using Clock = std::chrono::steady_clock;

// One write to every 4 KiB of the rank's host region (the value it holds, written back), so that
// no row pays the region's first touch. A freshly mapped region costs its first write to each
// page a fault in this process, and in a VM the hypervisor's first touch too (15-30 us per 4 KiB
// page on the development VM, where the arena falls back to 4 KiB shared memory: seconds for the
// whole region). A store row walks every chunk of the arena in its first seconds, so the first
// protocol row (hugepin) paid all of it and the engine way after it nothing: a settle p99 of
// 150-500 ms at 32 jobs in flight, which moved to the engine way when it ran first.
void warm(const RegionInfo& region) {
  for (uint64_t offset = 0; offset < region.bytes; offset += 4096) {
    volatile std::byte* byte = region.base + offset;
    *byte = *byte;
  }
}

WorkerSessionOptions worker_options(const OffloadWorkerSetup& setup) {
  WorkerSessionOptions options;
  options.time_copies = true;
  options.time_copies_every = setup.time_every;
  options.engine.completion_poll_ns = setup.completion_poll_ns;
  options.engine.completion_spin = setup.spin;
  return options;
}

class OffloadWorker {
 public:
  explicit OffloadWorker(const OffloadWorkerSetup& setup)
      : setup_(setup),
        session_(real_os(), setup.arena, setup.rank % setup.tp, setup.rank / setup.tp, worker_options(setup)),
        geometry_(session_.geometry()),
        random_(setup.rank + 1) {
    if (setup.device >= 0) session_.pin(setup.device);
    kv_.emplace(session_.rank_geometry(), setup.gpu_blocks, setup.device);
    session_.set_device_kv(kv_->segments(), setup.device >= 0 ? WorkerBackend::kGpu : WorkerBackend::kHost);
    warm(session_.region());
    // Timing starts the GPU clock's rounds (dma/gpu_clock.h): one empty span now, so that its rate
    // is measured on rounds of the rows before the first timed job, as in an engine that times its
    // copies from the start, not on the first protocol row's alone.
    // ... and an idle rate's baseline and more before the rows, timing in use throughout (an empty
    // span every quarter second keeps the rounds at their busy pace): under the copy engine row's
    // load, the rate waited for a narrow handshake while the windows grew at the assumed drift,
    // and the first protocol row read windows of 60-174 us at the median (the H200 host, tenth
    // session). An engine's start-up (loading its model) gives its clock that time; so does this.
    const int spans = setup.device >= 0 ? 7 : 1;
    for (int i = 0; i < spans; ++i) {
      if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(250));
      read_empty_span();
    }
  }

  // A clock that cannot place yet fails the spans, not the rank: the rows' own spans say so.
  void read_empty_span() {
    CopyEngine& engine = session_.engine();
    try {
      const uint64_t start = engine.mark(Direction::kHostToDevice, nullptr);
      (void)engine.span(start, engine.mark(Direction::kHostToDevice, nullptr));
    } catch (const Error& error) {
      std::cerr << "hugepin bench offload: rank " << setup_.rank << ": warming the GPU clock: " << error.what() << "\n";
    }
  }

  void run() {
    // The engines' way sleeps poll_interval_ns between looks at its events: with the kernel's
    // default timer slack (50 us) each sleep could run 50 us longer than asked, which hugepin's
    // polling threads do not pay (kCompletionPollSlackNs). A failure leaves the default.
    (void)real_os().set_timer_slack_ns(kCompletionPollSlackNs);
    pollfd fds[2] = {{setup_.channel, POLLIN, 0}, {session_.completion_fd(), POLLIN, 0}};
    for (BenchRequest request;;) {
      // The engines' way polls its events while any is out (spinning: without sleeping between);
      // otherwise sleep until something comes.
      const timespec poll_every{0, setup_.spin ? 0 : setup_.poll_interval_ns};
      ::ppoll(fds, 2, engine_jobs_.empty() ? nullptr : &poll_every, nullptr);
      uint64_t landed = 0;
      if (::read(fds[1].fd, &landed, sizeof landed) > 0) session_.take_finished(&finished_);
      poll_engine_jobs();
      while (receive_packet(setup_.channel, &request, /*wait=*/false)) {
        if (request.op == BenchOp::kStop) return;
        handle(request);
      }
    }
  }

 private:
  std::vector<BlockPair> pairs_of(const BenchRequest& request) const {
    std::vector<BlockPair> pairs;
    const Direction direction = request.store ? Direction::kDeviceToHost : Direction::kHostToDevice;
    for (uint32_t i = 0; i < request.count; ++i) {
      geometry_.append_chunk_pairs(direction, request.copies[i].chunk,
                                   request.copies[i].slot * geometry_.blocks_per_chunk(), &pairs);
    }
    return pairs;
  }

  void handle(const BenchRequest& request) {
    switch (request.op) {
      case BenchOp::kJob: {
        const std::vector<BlockPair> pairs = pairs_of(request);
        request.store ? session_.store(request.job, pairs) : session_.load(request.job, pairs);
        break;
      }
      case BenchOp::kEngineJob: launch_engine_job(request); break;
      case BenchOp::kEndStep: session_.release(request.value); break;
      case BenchOp::kBurst: burst(request); break;
      case BenchOp::kStamp: stamp(request.value); break;
      case BenchOp::kTimings: send_timings(); break;
      case BenchOp::kCheck: check(request); break;
      case BenchOp::kStop: break;
    }
  }

  // The engines' way: the copy and its event, found done by polling, reported over the socket.
  // Timing marks around the jobs the session would time too (copies_timed: the same ids); a timed
  // job's end mark is also its event, as in vLLM's handler and in hugepin's session
  // (CopyEngine::when_reached): one point on the stream after the copies in both rows.
  void launch_engine_job(const BenchRequest& request) {
    CopyEngine& engine = session_.engine();
    const Direction direction = request.store ? Direction::kDeviceToHost : Direction::kHostToDevice;
    const std::vector<BlockPair> pairs = pairs_of(request);
    if (!copies_timed(request.job, setup_.time_every)) {
      engine_jobs_.push_back({request.job, engine.launch(direction, pairs), 0, 0});
      return;
    }
    const uint64_t start = engine.mark(direction, nullptr);
    engine.enqueue(direction, pairs, CopyBackend::kAuto, nullptr);
    engine_jobs_.push_back({request.job, nullptr, start, engine.mark(direction, nullptr)});
  }

  // Reports every job found done, then reads the timed ones' marks (span() may wait for an end
  // mark: after the report, as hugepin's ranks read theirs after posting) and keeps their timings
  // for send_timings().
  void poll_engine_jobs() {
    BenchReply reply;
    reply.kind = BenchReplyKind::kCompletions;
    reply.rank = setup_.rank;
    timed_done_.clear();
    // Each direction has its own stream: look at every job, not only the oldest.
    for (auto it = engine_jobs_.begin(); it != engine_jobs_.end() && reply.count < kMaxTimingsPerPacket;) {
      if (!(it->done ? it->done->done() : session_.engine().reached(it->end))) {
        ++it;
        continue;
      }
      const int64_t landed_ns = real_os().monotonic_ns();
      reply.timings[reply.count++] = {it->job, 0, 0, landed_ns};
      if (it->end != 0) timed_done_.push_back({it->job, it->start, it->end, landed_ns});
      it = engine_jobs_.erase(it);
    }
    if (reply.count > 0) send_packet(setup_.channel, reply);
    for (const TimedEngineJob& job : timed_done_) {
      const CopyEngine::MarkSpan span = session_.engine().span(job.start, job.end);
      engine_timings_.push_back({job.job, span.elapsed_ns, span.end_ns, job.landed_ns, span.end_window_ns});
    }
  }

  // Batches of timings, hugepin's jobs' and the engine way's timed ones (untimed: GPU time and end
  // 0); the last packet holds fewer than a full one (none, when they came out even).
  void send_timings() {
    session_.take_finished(&finished_);
    std::vector<JobTiming> timings;
    for (const JobResult& result : finished_) {
      timings.push_back({result.job, result.copy_ns, result.gpu_done_ns, result.landed_ns, result.gpu_done_window_ns});
    }
    timings.insert(timings.end(), engine_timings_.begin(), engine_timings_.end());
    finished_.clear();
    engine_timings_.clear();
    BenchReply reply;
    reply.kind = BenchReplyKind::kTimings;
    reply.rank = setup_.rank;
    size_t next = 0;
    do {
      reply.count = 0;
      for (; next < timings.size() && reply.count < kMaxTimingsPerPacket; ++next) {
        reply.timings[reply.count++] = timings[next];
      }
      send_packet(setup_.channel, reply);
    } while (reply.count == kMaxTimingsPerPacket);
  }

  // The copy engine alone: random chunks and slots, `jobs_in_flight` launches out at a time.
  void burst(const BenchRequest& request) {
    CopyEngine& engine = session_.engine();
    std::uniform_int_distribution<uint64_t> chunk(0, geometry_.chunk_count() - 1);
    std::uniform_int_distribution<uint64_t> slot(0, setup_.gpu_blocks / geometry_.blocks_per_chunk() - 1);
    std::deque<std::unique_ptr<CopyCompletion>> out;
    uint64_t bytes = 0;
    bool store = request.mix != Mix::kLoad;
    const auto start = Clock::now();
    const auto until = start + std::chrono::duration<double>(request.seconds);
    std::vector<BlockPair> pairs;
    while (Clock::now() < until) {
      if (out.size() == request.jobs_in_flight) {
        out.front()->wait();
        out.pop_front();
      }
      pairs.clear();
      const Direction direction = store ? Direction::kDeviceToHost : Direction::kHostToDevice;
      for (uint32_t i = 0; i < request.chunks_per_job; ++i) {
        geometry_.append_chunk_pairs(direction, chunk(random_), slot(random_) * geometry_.blocks_per_chunk(), &pairs);
      }
      out.push_back(engine.launch(direction, pairs));
      bytes += copy_request_bytes(engine.views(), pairs);
      if (request.mix == Mix::kMixed) store = !store;
    }
    for (auto& completion : out) completion->wait();  // what was launched in time counts once landed
    BenchReply reply;
    reply.kind = BenchReplyKind::kBurstDone;
    reply.rank = setup_.rank;
    reply.bytes = bytes;
    reply.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    send_packet(setup_.channel, reply);
  }

  cli::ChunkStamp slot_stamp(uint64_t origin, uint64_t tag, size_t segment) const {
    return {origin, tag, setup_.rank, segment};
  }

  void stamp(uint64_t tag) {
    const uint64_t slots = setup_.gpu_blocks / geometry_.blocks_per_chunk();
    for (size_t s = 0; s < kv_->segments().size(); ++s) {
      staging_.resize(geometry_.chunk_segment_bytes(setup_.rank, s));
      for (uint64_t slot = 0; slot < slots; ++slot) {
        cli::stamp_blocks(staging_, kv_->segments()[s].bytes_per_block, slot_stamp(slot, tag, s));
        kv_->write(s, slot * geometry_.blocks_per_chunk(), staging_);
      }
    }
    ack("");
  }

  void check(const BenchRequest& request) {
    for (uint32_t i = 0; i < request.count; ++i) {
      const SlotCopy& copy = request.copies[i];
      for (size_t s = 0; s < kv_->segments().size(); ++s) {
        staging_.resize(geometry_.chunk_segment_bytes(setup_.rank, s));
        kv_->read(s, copy.slot * geometry_.blocks_per_chunk(), staging_);
        if (auto b = cli::wrong_block(staging_, kv_->segments()[s].bytes_per_block, slot_stamp(copy.origin, request.value, s))) {
          return ack(cat("rank ", setup_.rank, ": GPU slot ", copy.slot, " segment ", s, " block ", *b,
                         " does not hold what slot ", copy.origin, " held"));
        }
      }
    }
    ack("");
  }

  void ack(const std::string& failure) {
    BenchReply reply;
    reply.kind = BenchReplyKind::kAck;
    reply.rank = setup_.rank;
    reply.failed = failure.empty() ? 0 : 1;
    failure.copy(reply.message, sizeof reply.message - 1);
    send_packet(setup_.channel, reply);
  }

  struct EngineJob {
    uint64_t job;
    std::unique_ptr<CopyCompletion> done;  // null when timed: the end mark tells
    uint64_t start;
    uint64_t end;  // 0: not timed
  };
  struct TimedEngineJob {
    uint64_t job;
    uint64_t start;
    uint64_t end;
    int64_t landed_ns;
  };

  const OffloadWorkerSetup& setup_;
  std::optional<cli::DeviceKv> kv_;  // before session_: freed after its copies landed
  WorkerSession session_;
  const ChunkGeometry& geometry_;
  std::vector<JobResult> finished_;
  std::deque<EngineJob> engine_jobs_;
  std::vector<TimedEngineJob> timed_done_;  // poll_engine_jobs(): found done, timed
  std::vector<JobTiming> engine_timings_;   // the engine way's timed jobs, until sent
  std::vector<std::byte> staging_;
  std::mt19937_64 random_;
};

}  // namespace

void run_offload_worker(const OffloadWorkerSetup& setup) {
  name_this_thread("hugepin-rank");  // the process's name too, in ps and the rank-thread figures
  try {
    OffloadWorker worker(setup);
    worker.run();
  } catch (const std::exception& error) {
    std::cerr << "hugepin bench offload: rank " << setup.rank << ": " << error.what() << "\n";
    _exit(1);
  }
  _exit(0);
}

}  // namespace hugepin::bench
