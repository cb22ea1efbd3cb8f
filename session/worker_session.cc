#include "session/worker_session.h"

#include <cerrno>
#include <chrono>

#include "base/error.h"
#include "base/log.h"
#include "base/pattern.h"
#include "base/parallel.h"
#include "dma/gpu_runtime.h"
#include "ipc/arena_control.h"
#include "ipc/doorbell.h"

namespace hugepin {

// What a completion call needs: one per enqueued copy or release, freed by the call.
struct WorkerSession::Landing {
  WorkerSession* session;
  bool copy;
  uint64_t sequence;  // copies: its sequence number; releases: unused
  uint64_t job;       // copies: the job; releases: the epoch
};

namespace {

// While the ring is full the backlog thread re-tries this often: the scheduler is behind, and
// posting a little later costs nothing that matters then.
constexpr auto kBacklogRetry = std::chrono::microseconds(50);

}  // namespace

WorkerSession::WorkerSession(Os& os, std::string_view arena, uint32_t tp_rank, uint32_t pp_rank,
                             const WorkerSessionOptions& options)
    : os_(&os),
      options_(options),
      attachment_(RankAttachment::attach(os, arena, tp_rank, pp_rank, options.attach)),
      geometry_(ChunkGeometry::of_layout(segment_layout(attachment_.segment().view()))) {
  backlog_thread_ = std::thread([this] {
    name_this_thread("hugepin-backlog");
    run_backlog();
  });
}

WorkerSession::~WorkerSession() {
  try {
    detach();
  } catch (const std::exception& error) {
    log::warn(cat("rank ", attachment_.rank(), ": detaching: ", error.what()));
  }
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  backlog_wanted_.notify_all();
  if (backlog_thread_.joinable()) backlog_thread_.join();
  if (completion_fd_.load() >= 0) os_->close(completion_fd_.load());
}

void WorkerSession::pin(int device) {
  GpuRuntime* runtime = cuda_runtime();
  if (runtime == nullptr) throw Error("this hugepin was built without CUDA: nothing to pin for", ENODEV);
  if (pinned_.host() != nullptr) throw Error(cat("rank ", attachment_.rank(), " is already pinned for GPU ", device_), EINVAL);
  const MappedRegion& region = attachment_.region();
  PinOptions pin;
  pin.device = device;
  pin.alignment = region.page_size();
  pin.threads = options_.pin_threads;
  attachment_.set_state(RankState::kPinning);
  try {
    pinned_ = pin_region(*runtime, region.data(), region.size(), pin,
                         [this](uint64_t done, uint64_t) { attachment_.set_pinned_bytes(done); });
  } catch (const Error& error) {
    attachment_.set_state(RankState::kAttached);
    throw Error(error.what(), error.errno_value() != 0 ? error.errno_value() : ENODEV);
  }
  device_ = device;
  attachment_.set_state(RankState::kReady);
}

void WorkerSession::set_device_kv(std::span<const DeviceSegment> segments, WorkerBackend backend) {
  std::vector<SegmentView> views = geometry_.segment_views(attachment_.rank(), attachment_.region().data(), segments);
  if (backend == WorkerBackend::kAuto) backend = pinned_.host() != nullptr ? WorkerBackend::kGpu : WorkerBackend::kHost;
  CopyEngineOptions engine = options_.engine;
  std::unique_ptr<CopyEngine> made;
  if (backend == WorkerBackend::kGpu) {
    if (pinned_.host() == nullptr) {
      throw Error(cat("rank ", attachment_.rank(), ": the GPU backend needs the region pinned first (pin(device))"), ENODEV);
    }
    engine.device = device_;
    engine.host_split_base = reinterpret_cast<uintptr_t>(pinned_.host());
    engine.host_split_bytes = pinned_.chunk_bytes();
    made = make_cuda_copy_engine(std::move(views), engine);
  } else {
    made = make_host_copy_engine(std::move(views), engine);
  }
  wait_all_landed();
  {
    std::lock_guard lock(mutex_);
    marks_.clear();  // the old engine's: its jobs report no times
  }
  engine_ = std::move(made);
  engine_is_host_ = backend == WorkerBackend::kHost;
}

void WorkerSession::store(JobId job, std::span<const BlockPair> pairs, void* stream) {
  launch(JobKind::kStore, job, pairs, stream);
}

void WorkerSession::load(JobId job, std::span<const BlockPair> pairs, void* stream) {
  launch(JobKind::kLoad, job, pairs, stream);
}

bool copies_timed(JobId job, uint32_t every) {
  return every <= 1 || mix64(job) % every == 0;  // splitmix64: consecutive ids land far apart
}

void WorkerSession::launch(JobKind kind, JobId job, std::span<const BlockPair> pairs, void* stream) {
  if (!engine_) throw Error(cat("rank ", attachment_.rank(), ": no device KV yet (set_device_kv first)"), EINVAL);
  if (job == 0) throw Error("job id 0: job ids start at 1", EINVAL);
  const Direction direction = kind == JobKind::kStore ? Direction::kDeviceToHost : Direction::kHostToDevice;
  try {
    check_copy_request(engine_->views(), pairs, direction, 1);
  } catch (const Error& error) {
    throw Error(error.what(), ERANGE);
  }
  auto* landing = new Landing{this, true, 0, job};
  {
    std::lock_guard lock(mutex_);
    if (in_flight_.count(job) != 0 || landed_.count(job) != 0) {
      delete landing;
      throw Error(cat("rank ", attachment_.rank(), ": job ", job, " is already launched here"), EINVAL);
    }
    landing->sequence = next_copy_++;
    copies_landed_.push_back(false);
    in_flight_[job] = {job, kind, 0, copy_request_bytes(engine_->views(), pairs), os_->monotonic_ns(), 0};
    ++calls_pending_;
  }
  try {
    const bool timed = options_.time_copies && copies_timed(job, options_.time_copies_every);
    const uint64_t start = timed ? engine_->mark(direction, stream) : 0;
    engine_->enqueue(direction, pairs, CopyBackend::kAuto, stream);
    if (!timed) {
      engine_->when_done(direction, stream, &WorkerSession::landed_call, landing);
    } else {
      // The end mark also says when the copies landed (polling or spinning: one point on the stream
      // after them, not two; asleep, the engine records a point of its own after the mark).
      const uint64_t end = engine_->mark(direction, stream);
      {
        std::lock_guard lock(mutex_);
        marks_[job] = {start, end};
      }
      engine_->when_reached(end, &WorkerSession::landed_call, landing);
    }
  } catch (const Error& error) {
    // Nothing of the launch is in flight (a failed enqueue or when_done waits its stream out
    // before it throws): the job failed here, and its report may say so now.
    {
      std::lock_guard lock(mutex_);
      in_flight_[job].error = error.errno_value() != 0 ? error.errno_value() : EIO;
    }
    copy_landed(landing, 0);
    throw;
  }
}

void WorkerSession::landed_call(void* context, int error) {
  auto* landing = static_cast<Landing*>(context);
  if (landing->copy) {
    landing->session->copy_landed(landing, error);
  } else {
    landing->session->release_reached(landing);
  }
}

void WorkerSession::copy_landed(Landing* landing, int error) {
  std::unique_ptr<Landing> owned(landing);
  {
    std::lock_guard lock(mutex_);
    auto it = in_flight_.find(landing->job);
    JobResult result = it->second;
    in_flight_.erase(it);
    if (result.error == 0) result.error = error;  // the copies failed on the GPU
    result.landed_ns = os_->monotonic_ns();
    Report report{result.error == 0 ? ReportKind::kCopyComplete : ReportKind::kCopyFailed, 0,
                  static_cast<uint32_t>(result.error), 0, result.job, 0};
    post_locked(report);
    landed_.emplace(result.job, result);
    landed_order_.push_back(result.job);
    record_landed(landing->sequence);
    post_releases_locked();
    --calls_pending_;
  }
  changed_.notify_all();
  const int fd = completion_fd_.load(std::memory_order_acquire);  // pairs with the release in completion_fd()
  if (fd >= 0) {
    const uint64_t one = 1;
    os_->write(fd, &one, sizeof(one));  // fails only when the counter is full: readable anyway
  }
}

void WorkerSession::record_landed(uint64_t sequence) {
  copies_landed_[sequence - first_unlanded_] = true;
  while (!copies_landed_.empty() && copies_landed_.front()) {
    copies_landed_.pop_front();
    ++first_unlanded_;
  }
}

void WorkerSession::release(Epoch epoch, void* stream) {
  if (stream != nullptr && !engine_) {
    throw Error(cat("rank ", attachment_.rank(), ": a release on a stream needs the device KV set first"), EINVAL);
  }
  Landing* landing = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (epoch <= last_epoch_) {
      throw Error(cat("rank ", attachment_.rank(), ": release of epoch ", epoch, " after epoch ", last_epoch_,
                      " (epochs must increase)"), EINVAL);
    }
    last_epoch_ = epoch;
    releases_.push_back({epoch, next_copy_, stream == nullptr});
    if (stream != nullptr) {
      landing = new Landing{this, false, 0, epoch};
      ++calls_pending_;
    } else {
      post_releases_locked();
    }
  }
  if (landing == nullptr) return;
  try {
    engine_->when_done(Direction::kDeviceToHost, stream, &WorkerSession::landed_call, landing);
  } catch (const Error&) {
    // The engine waited the stream out before it threw: the stream has reached this point.
    release_reached(landing);
    throw;
  }
}

void WorkerSession::release_reached(Landing* landing) {
  std::unique_ptr<Landing> owned(landing);
  {
    std::lock_guard lock(mutex_);
    // Releases on different streams may reach them in any order: mark this one by its epoch.
    for (Release& release : releases_) {
      if (release.epoch == landing->job) {
        release.stream_reached = true;
        break;
      }
    }
    post_releases_locked();
    --calls_pending_;
  }
  changed_.notify_all();
}

void WorkerSession::post_releases_locked() {
  while (!releases_.empty() && releases_.front().stream_reached &&
         releases_.front().copies_before <= first_unlanded_) {
    post_locked({ReportKind::kComputeRelease, 0, 0, 0, releases_.front().epoch, 0});
    releases_.pop_front();
  }
}

void WorkerSession::post_locked(const Report& report) {
  if (backlog_.empty()) {
    Report copy = report;
    if (attachment_.try_post(std::span<Report>(&copy, 1)) == 1) return;
  }
  backlog_.push_back(report);
  backlog_wanted_.notify_one();
}

void WorkerSession::flush_backlog_locked() {
  while (!backlog_.empty()) {
    Report report = backlog_.front();
    if (attachment_.try_post(std::span<Report>(&report, 1)) == 0) return;
    backlog_.pop_front();
  }
}

void WorkerSession::run_backlog() {
  std::unique_lock lock(mutex_);
  for (;;) {
    backlog_wanted_.wait(lock, [this] { return stopping_ || !backlog_.empty(); });
    if (stopping_ && backlog_.empty()) return;
    flush_backlog_locked();
    if (backlog_.empty()) continue;
    lock.unlock();
    std::this_thread::sleep_for(kBacklogRetry);
    lock.lock();
  }
}

void WorkerSession::post_job_done(JobId job, int error) {
  std::lock_guard lock(mutex_);
  post_locked({error == 0 ? ReportKind::kCopyComplete : ReportKind::kCopyFailed, 0, static_cast<uint32_t>(error), 0, job, 0});
}

void WorkerSession::heartbeat() {
  std::lock_guard lock(mutex_);
  if (!backlog_.empty() || !attachment_.attached()) return;  // a full ring says it is alive
  attachment_.heartbeat();
}

size_t WorkerSession::take_finished(std::vector<JobResult>* out, size_t max) {
  const size_t first = out->size();
  std::vector<std::pair<uint64_t, uint64_t>> marks;
  {
    std::lock_guard lock(mutex_);
    while (out->size() - first < max && !landed_order_.empty()) {
      auto it = landed_.find(landed_order_.front());
      out->push_back(it->second);
      landed_.erase(it);
      landed_order_.pop_front();
      auto mark = marks_.find(out->back().job);
      marks.push_back(mark != marks_.end() ? mark->second : std::pair<uint64_t, uint64_t>{0, 0});
      if (mark != marks_.end()) marks_.erase(mark);
    }
  }
  // Outside the lock: reading events is a CUDA call, and completion calls must never wait on one.
  // A timing that cannot be read costs only the timing: the results are already out of landed_,
  // and throwing would lose them (the caller would never see those jobs finish).
  for (size_t i = 0; i < marks.size(); ++i) {
    if (marks[i].second == 0) continue;
    try {
      const CopyEngine::MarkSpan span = engine_->span(marks[i].first, marks[i].second);
      (*out)[first + i].copy_ns = span.elapsed_ns;
      (*out)[first + i].gpu_done_ns = span.end_ns;
      (*out)[first + i].gpu_done_window_ns = span.end_window_ns;
    } catch (const std::exception& error) {
      if (!timing_warned_.exchange(true)) {
        log::warn(cat("rank ", attachment_.rank(), ": job ", (*out)[first + i].job,
                      " reports no copy time: ", error.what(), " (said once per session)"));
      }
    }
  }
  return marks.size();
}

bool WorkerSession::wait(JobId job, int64_t timeout_ns) {
  std::unique_lock lock(mutex_);
  if (in_flight_.count(job) == 0 && landed_.count(job) == 0) {
    throw Error(cat("rank ", attachment_.rank(), ": job ", job, " was never launched here (or was already taken)"), ENOENT);
  }
  auto landed = [&] { return in_flight_.count(job) == 0; };
  if (timeout_ns < 0) {
    changed_.wait(lock, landed);
    return true;
  }
  return changed_.wait_for(lock, std::chrono::nanoseconds(timeout_ns), landed);
}

int WorkerSession::completion_fd() {
  std::lock_guard lock(mutex_);
  if (completion_fd_.load(std::memory_order_relaxed) < 0) {
    const int fd = os_->event_fd();
    if (fd < 0) throw_errno("eventfd", -fd);
    const uint64_t one = 1;
    if (!landed_.empty()) os_->write(fd, &one, sizeof(one));  // copies landed before anyone asked
    completion_fd_.store(fd, std::memory_order_release);
  }
  return completion_fd_.load(std::memory_order_relaxed);
}

size_t WorkerSession::in_flight() const {
  std::lock_guard lock(mutex_);
  return in_flight_.size();
}

void WorkerSession::wait_all_landed() {
  if (engine_) engine_->synchronize();
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return calls_pending_ == 0; });
}

void WorkerSession::detach() {
  if (!attachment_.attached()) return;
  wait_all_landed();
  {
    std::unique_lock lock(mutex_);
    // What the ring could not take yet goes first, in order, waiting for room as long as the
    // attachment's post timeout allows.
    std::vector<Report> rest(backlog_.begin(), backlog_.end());
    backlog_.clear();
    engine_.reset();
    struct DetachAnyway {
      RankAttachment& attachment;
      ~DetachAnyway() {
        try {
          attachment.detach();
        } catch (const std::exception& error) {
          log::warn(error.what());
        }
      }
    } detach_anyway{attachment_};
    if (!rest.empty()) attachment_.post_batch(rest);
  }
  if (pinned_.host() != nullptr) pinned_.unpin();
}

CopyEngine& WorkerSession::engine() {
  if (!engine_) throw Error(cat("rank ", attachment_.rank(), ": no device KV yet (set_device_kv first)"), EINVAL);
  return *engine_;
}

RegionInfo WorkerSession::region() const {
  const MappedRegion& region = attachment_.region();
  RegionInfo info;
  info.base = region.data();
  info.bytes = region.size();
  info.page_size = region.page_size();
  info.numa_node = attachment_.segment().view().regions[attachment_.rank()].node_obtained;
  info.pinned = pinned_.host() != nullptr;
  info.device = device_;
  info.rank = attachment_.rank();
  return info;
}

}  // namespace hugepin
