#include "cli/demo/demo_worker.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "base/error.h"
#include "base/pattern.h"
#include "base/size.h"
#include "cli/demo/demo_channel.h"
#include "cli/demo/kv_model.h"
#include "dma/copy_engine.h"
#include "dma/device_buffer.h"
#include "dma/gpu_runtime.h"
#include "dma/pinning.h"
#include "dma/spill.h"
#include "ipc/copy_tracker.h"
#include "ipc/rank_attachment.h"

namespace hugepin::demo {
namespace {

using Clock = std::chrono::steady_clock;

// The "GPU" side of the rank's KV cache: device memory, or host memory with the host engine.
class KvStore {
 public:
  KvStore(bool gpu, int device, uint64_t bytes) : gpu_(gpu), device_(device) {
    if (gpu_) {
      buffer_ = std::make_unique<DeviceBuffer>(device, bytes);
    } else {
      host_.reset(static_cast<std::byte*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
      if (!host_) throw Error("cannot allocate the demo's KV cache");
    }
  }
  uint64_t base() const { return gpu_ ? buffer_->address() : reinterpret_cast<uintptr_t>(host_.get()); }
  // Writes [offset, offset + bytes) from host memory.
  void write(uint64_t offset, const std::byte* data, size_t bytes) {
    if (gpu_) {
      copy_to_device(device_, base() + offset, data, bytes);
    } else {
      std::copy(data, data + bytes, host_.get() + offset);
    }
  }
  void read(uint64_t offset, std::byte* out, size_t bytes) const {
    if (gpu_) {
      copy_from_device(device_, out, base() + offset, bytes);
    } else {
      std::copy(host_.get() + offset, host_.get() + offset + bytes, out);
    }
  }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  bool gpu_;
  int device_;
  std::unique_ptr<DeviceBuffer> buffer_;
  std::unique_ptr<std::byte, Free> host_;
};

// Completions of one direction, by the event index the tracker knows them by.
class Stream {
 public:
  explicit Stream(uint16_t rank)
      : tracker_(rank, [this](uint64_t event) { return at(event).done(); },
                 [this](uint64_t event) { at(event).wait(); }) {}

  void launched(JobId job, std::unique_ptr<CopyCompletion> completion) {
    completions_.emplace(++last_event_, std::move(completion));
    tracker_.copy_launched(job, last_event_);
  }
  // Reports for finished jobs; forgets their completions.
  void poll(std::vector<Report>* out, bool flush) {
    if (flush) {
      tracker_.flush(out);
    } else {
      tracker_.poll(out);
    }
    completions_.erase(completions_.begin(), completions_.upper_bound(tracker_.high_water_mark()));
  }
  uint64_t last_event() const { return last_event_; }
  uint64_t done_through() const { return tracker_.high_water_mark(); }

 private:
  CopyCompletion& at(uint64_t event) { return *completions_.at(event); }

  std::map<uint64_t, std::unique_ptr<CopyCompletion>> completions_;
  uint64_t last_event_ = 0;
  CopyTracker tracker_;
};

class Worker {
 public:
  explicit Worker(const WorkerSetup& setup)
      : setup_(setup),
        plan_(*setup.plan),
        rank_plan_(plan_.ranks.at(setup.rank)),
        shape_(rank_shape(rank_plan_, plan_.chunk_count, plan_.blocks_per_chunk)),
        attachment_(RankAttachment::attach(real_os(), setup.arena, rank_plan_.tp_rank, rank_plan_.pp_rank)),
        kv_(setup.gpu, setup.device, shape_.device_bytes),
        loads_(static_cast<uint16_t>(setup.rank)),
        stores_(static_cast<uint16_t>(setup.rank)) {
    std::byte* host = attachment_.region().data();
    std::vector<SegmentView> views = segment_views(shape_, kv_.base(), host);
    CopyEngineOptions options;
    options.device = setup.device;
    if (setup.gpu) {
      attachment_.set_state(RankState::kPinning);
      const auto start = Clock::now();
      PinOptions pin;
      pin.device = setup.device;
      pin.alignment = attachment_.region().page_size();
      pinned_ = pin_region(*cuda_runtime(), host, attachment_.region().size(), pin,
                           [this](uint64_t done, uint64_t) { attachment_.set_pinned_bytes(done); });
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      std::cerr << "hugepin demo: rank " << setup.rank << ": pinned " << format_bytes(attachment_.region().size())
                << " for GPU " << setup.device << " in " << seconds << " s (" << pinned_.chunks() << " registrations)\n";
      options.host_split_base = reinterpret_cast<uintptr_t>(host);
      options.host_split_bytes = pinned_.chunk_bytes();
      engine_ = make_cuda_copy_engine(std::move(views), options);
    } else {
      engine_ = make_host_copy_engine(std::move(views), options);
    }
    attachment_.set_state(RankState::kReady);
    if (!setup.config->spill_dir.empty()) open_spill_files();
  }

  void run() {
    auto last_heartbeat = Clock::now();
    for (bool stopping = false;;) {
      Message message;
      while (!stopping && try_receive(setup_.channel_fd, &message)) {
        if (message.type == MessageType::kJob) {
          launch(message);
        } else if (message.type == MessageType::kEndStep) {
          releases_.push_back({message.epoch, loads_.last_event(), stores_.last_event()});
        } else if (message.type == MessageType::kStop) {
          stopping = true;
        }
      }
      post_finished(stopping);
      if (stopping) break;
      if (Clock::now() - last_heartbeat > std::chrono::milliseconds(100)) {
        attachment_.heartbeat();
        last_heartbeat = Clock::now();
      }
      pollfd channel{setup_.channel_fd, POLLIN, 0};
      ::poll(&channel, 1, in_flight() ? 0 : 2);
      if (in_flight()) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    attachment_.detach();
  }

 private:
  struct DiskJob {
    JobId job;
    std::vector<SpillCompletion> parts;  // one per segment file
  };

  struct Release {
    Epoch epoch;
    uint64_t loads_through;
    uint64_t stores_through;
  };

  bool in_flight() const {
    return loads_.done_through() < loads_.last_event() || stores_.done_through() < stores_.last_event() ||
           !disk_jobs_.empty();
  }

  std::vector<BlockPair> pairs_of(const Message& job, bool store) const {
    std::vector<BlockPair> pairs;
    for (const ChunkCopy& copy : job.chunks) {
      for (uint64_t b = 0; b < plan_.blocks_per_chunk; ++b) {
        const uint64_t gpu = copy.gpu_first_block + b;
        const uint64_t host = copy.chunk * plan_.blocks_per_chunk + b;
        pairs.push_back(store ? BlockPair{gpu, host} : BlockPair{host, gpu});
      }
    }
    return pairs;
  }

  // The model's output for a store: every block of the job's GPU slots gets its stamped bytes.
  void produce(const Message& job) {
    for (const ChunkCopy& copy : job.chunks) {
      for (size_t s = 0; s < shape_.segments.size(); ++s) {
        const SegmentShape& segment = shape_.segments[s];
        staging_.resize(plan_.blocks_per_chunk * segment.bytes_per_block);
        for (uint64_t b = 0; b < plan_.blocks_per_chunk; ++b) {
          fill_pattern(staging_.data() + b * segment.bytes_per_block, segment.bytes_per_block,
                       block_seed(copy.chunk, copy.version, setup_.rank, s, b));
        }
        kv_.write(segment.device_offset + copy.gpu_first_block * segment.bytes_per_block, staging_.data(),
                  staging_.size());
      }
    }
  }

  // After a load: the GPU slots hold exactly what the store of that version wrote.
  bool loaded_right(const Message& job) {
    for (const ChunkCopy& copy : job.chunks) {
      for (size_t s = 0; s < shape_.segments.size(); ++s) {
        const SegmentShape& segment = shape_.segments[s];
        staging_.resize(plan_.blocks_per_chunk * segment.bytes_per_block);
        kv_.read(segment.device_offset + copy.gpu_first_block * segment.bytes_per_block, staging_.data(),
                 staging_.size());
        for (uint64_t b = 0; b < plan_.blocks_per_chunk; ++b) {
          if (find_pattern_mismatch(staging_.data() + b * segment.bytes_per_block, segment.bytes_per_block,
                                    block_seed(copy.chunk, copy.version, setup_.rank, s, b))) {
            std::cerr << "hugepin demo: rank " << setup_.rank << ": job " << job.job << " loaded chunk " << copy.chunk
                      << " (version " << copy.version << ") wrong in segment " << s << " block " << b << "\n";
            return false;
          }
        }
      }
    }
    return true;
  }

  // The disk tier: one spill file per segment, chunk c of the segment at offset c * its chunk
  // bytes (a chunk is blocks_per_chunk blocks of one segment).
  void open_spill_files() {
    std::byte* host = attachment_.region().data();
    for (size_t s = 0; s < shape_.segments.size(); ++s) {
      const SegmentShape& segment = shape_.segments[s];
      SpillOptions options;
      options.chunk_bytes = plan_.blocks_per_chunk * segment.bytes_per_block;
      std::span<std::byte> span(host + segment.host_offset, shape_.host_blocks * segment.bytes_per_block);
      std::string path = cat(setup_.config->spill_dir, "/", setup_.arena, ".rank", setup_.rank, ".seg", s, ".spill");
      spill_files_.push_back(SpillFile::open(real_os(), path, span, options));
    }
  }

  void launch_disk(const Message& job) {
    if (spill_files_.empty()) throw Error("a spill or restore job, and no --spill-dir");
    std::vector<uint64_t> chunks;
    for (const ChunkCopy& copy : job.chunks) chunks.push_back(copy.chunk);
    DiskJob disk{job.job, {}};
    for (SpillFile& file : spill_files_) {
      disk.parts.push_back(static_cast<DemoOp>(job.kind) == DemoOp::kSpill ? file.spill(chunks) : file.restore(chunks));
    }
    disk_jobs_.push_back(std::move(disk));
  }

  // Reports every disk job whose parts all finished (any order: each job has its own report).
  void post_disk_finished(bool wait) {
    for (auto it = disk_jobs_.begin(); it != disk_jobs_.end();) {
      bool ready = true;
      for (const SpillCompletion& part : it->parts) ready = ready && (wait || part.ready());
      if (!ready) {
        ++it;
        continue;
      }
      Report report{};
      report.kind = ReportKind::kCopyComplete;
      report.value = it->job;
      for (const SpillCompletion& part : it->parts) {
        const SpillResult& result = part.wait();
        if (!result.ok() && report.kind == ReportKind::kCopyComplete) {
          std::cerr << "hugepin demo: rank " << setup_.rank << ": " << result.failures.front().message << "\n";
          report.kind = ReportKind::kCopyFailed;
          report.flags = static_cast<uint32_t>(result.failures.front().errno_value);
        }
      }
      reports_.push_back(report);
      it = disk_jobs_.erase(it);
    }
  }

  void launch(const Message& job) {
    const DemoOp op = static_cast<DemoOp>(job.kind);
    if (op == DemoOp::kSpill || op == DemoOp::kRestore) {
      launch_disk(job);
      return;
    }
    const bool store = op == DemoOp::kStore;
    if (store) produce(job);
    std::vector<BlockPair> pairs = pairs_of(job, store);
    auto completion = engine_->launch(store ? Direction::kDeviceToHost : Direction::kHostToDevice, pairs);
    if (store) {
      stores_.launched(job.job, std::move(completion));
    } else {
      loads_by_job_.emplace(job.job, job);
      loads_.launched(job.job, std::move(completion));
    }
  }

  void post_finished(bool flush) {
    reports_.clear();
    stores_.poll(&reports_, flush);
    size_t stores_done = reports_.size();
    loads_.poll(&reports_, flush);
    for (size_t i = stores_done; i < reports_.size(); ++i) {
      auto it = loads_by_job_.find(reports_[i].value);
      if (it == loads_by_job_.end()) continue;
      if (reports_[i].kind == ReportKind::kCopyComplete && !loaded_right(it->second)) {
        reports_[i].kind = ReportKind::kCopyFailed;
        reports_[i].flags = EIO;
      }
      loads_by_job_.erase(it);
    }
    post_disk_finished(flush);
    while (!releases_.empty() && loads_.done_through() >= releases_.front().loads_through &&
           stores_.done_through() >= releases_.front().stores_through) {
      Report release{};
      release.kind = ReportKind::kComputeRelease;
      release.value = releases_.front().epoch;
      reports_.push_back(release);
      releases_.pop_front();
    }
    if (!reports_.empty()) attachment_.post_batch(reports_);
  }

  const WorkerSetup& setup_;
  const planner::CapacityPlan& plan_;
  const planner::RankPlan& rank_plan_;
  RankShape shape_;
  RankAttachment attachment_;
  KvStore kv_;
  PinnedRegion pinned_;
  std::unique_ptr<CopyEngine> engine_;
  Stream loads_;
  Stream stores_;
  std::map<JobId, Message> loads_by_job_;
  std::deque<Release> releases_;
  std::vector<Report> reports_;
  std::vector<std::byte> staging_;
  std::vector<SpillFile> spill_files_;  // before disk_jobs_: destroyed after them, draining first
  std::deque<DiskJob> disk_jobs_;
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
