#include "cli/demo/demo_worker.h"

#include <unistd.h>

#include <iostream>
#include <map>
#include <optional>

#include "cli/engine/device_kv.h"
#include "cli/engine/kv_stamp.h"
#include "cli/engine/worker_loop.h"
#include "disk/region_spill.h"

namespace hugepin::demo {
namespace {

class Worker final : public cli::WorkerHandler {
 public:
  explicit Worker(const WorkerSetup& setup)
      : setup_(setup),
        session_(real_os(), setup.arena, setup.rank % setup.config->plan.tp, setup.rank / setup.config->plan.tp),
        geometry_(session_.geometry()),
        segments_(session_.rank_geometry().segments) {
    if (setup.gpu) session_.pin(setup.device);
    kv_.emplace(session_.rank_geometry(), setup.config->plan.gpu_blocks, setup.gpu ? setup.device : -1);
    session_.set_device_kv(kv_->segments(), setup.gpu ? WorkerBackend::kGpu : WorkerBackend::kHost);
    if (setup.config->spill_dir.empty()) return;
    std::vector<SegmentSpan> spans;  // the disk tier: one spill file per segment
    for (size_t s = 0; s < segments_.size(); ++s) {
      spans.push_back({{session_.region().base + segments_[s].host_offset, geometry_.host_blocks() * segments_[s].bytes_per_block},
                       geometry_.chunk_segment_bytes(setup.rank, s)});
    }
    spill_.emplace(real_os(), cat(setup.config->spill_dir, "/", setup.arena, ".rank", setup.rank), spans);
  }

  void run() { cli::run_worker_loop(session_, setup_.channel_fd, *this); }

  // Stores: the model's output (every block stamped) goes to the GPU slots, then to the host.
  void job(const cli::Message& job) override {
    if (job.op == cli::CacheOp::kSpill || job.op == cli::CacheOp::kRestore) {
      if (!spill_) throw Error("a spill or restore job, and no --spill-dir");
      std::vector<uint64_t> chunks;
      for (uint32_t i = 0; i < job.count; ++i) chunks.push_back(job.chunks[i].chunk);
      spill_->submit(job.op == cli::CacheOp::kSpill ? SpillOp::kSpill : SpillOp::kRestore, chunks,
                     [this, id = job.job](int error) { session_.post_job_done(id, error); });
      return;
    }
    const bool store = job.op == cli::CacheOp::kStore;
    std::vector<BlockPair> pairs;
    for (uint32_t i = 0; i < job.count; ++i) {
      const cli::ChunkCopy& copy = job.chunks[i];
      for (size_t s = 0; store && s < segments_.size(); ++s) {
        cli::stamp_blocks(staging(s), segments_[s].bytes_per_block, stamp(copy, s));
        kv_->write(s, copy.gpu_first_block, staging_);
      }
      geometry_.append_chunk_pairs(store ? Direction::kDeviceToHost : Direction::kHostToDevice, copy.chunk,
                                   copy.gpu_first_block, &pairs);
    }
    if (!store) loads_.emplace(job.job, job);
    store ? session_.store(job.job, pairs) : session_.load(job.job, pairs);
  }

  // Every load that landed: its GPU slots hold exactly what the store of that version wrote.
  void landed() override {
    finished_.clear();
    session_.take_finished(&finished_);
    for (const JobResult& result : finished_) {
      auto it = loads_.find(result.job);
      for (uint32_t i = 0; it != loads_.end() && i < it->second.count; ++i) {
        const cli::ChunkCopy& copy = it->second.chunks[i];
        for (size_t s = 0; s < segments_.size(); ++s) {
          kv_->read(s, copy.gpu_first_block, staging(s));
          if (auto b = cli::wrong_block(staging_, segments_[s].bytes_per_block, stamp(copy, s))) {
            throw Error(cat("job ", result.job, " loaded chunk ", copy.chunk, " (version ", copy.version,
                            ") wrong in segment ", s, " block ", *b));
          }
        }
      }
      if (it != loads_.end()) loads_.erase(it);
    }
  }

  // Lets every load in flight land and checks it; the session detaches when the worker goes.
  void stop() override {
    for (const auto& [job, message] : loads_) session_.wait(job, -1);
    landed();
  }

 private:
  cli::ChunkStamp stamp(const cli::ChunkCopy& copy, size_t segment) const {
    return {copy.chunk, copy.version, setup_.rank, segment};
  }
  std::span<std::byte> staging(size_t segment) {
    staging_.resize(geometry_.chunk_segment_bytes(setup_.rank, segment));
    return staging_;
  }

  const WorkerSetup& setup_;
  std::optional<cli::DeviceKv> kv_;  // before session_: freed after its copies landed
  WorkerSession session_;
  const ChunkGeometry& geometry_;
  const std::vector<SegmentGeometry>& segments_;
  std::optional<RegionSpill> spill_;     // destroyed first: its jobs drain while the session lives
  std::map<JobId, cli::Message> loads_;  // launched, not yet checked
  std::vector<JobResult> finished_;
  std::vector<std::byte> staging_;
};

}  // namespace

void run_worker(const WorkerSetup& setup) {
  try {
    Worker worker(setup);
    worker.run();
  } catch (const std::exception& error) {
    std::cerr << "hugepin demo: rank " << setup.rank << ": " << error.what() << "\n";
    std::cerr.flush();
    _exit(1);
  }
  std::cout.flush();
  _exit(0);
}

}  // namespace hugepin::demo
