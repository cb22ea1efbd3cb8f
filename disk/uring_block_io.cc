// The io_uring BlockIo: one driver thread owns the ring. It creates it, registers the fixed
// buffers, turns queued batches into SQEs (at most queue_depth in flight), submits them in
// batches, reaps completions in batches, and continues short transfers. Submitters hand it work
// through a mutex-guarded list and wake it through an eventfd whose read is always armed in the
// ring, so the driver sleeps in one place: io_uring_enter.
#include <liburing.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "base/size.h"
#include "disk/block_io.h"
#include "disk/detail/block_batch.h"

namespace hugepin {
namespace {

using detail::BlockBatch;
using detail::BlockRequest;

// The kernel refuses a fixed buffer larger than this (io_uring/rsrc.c).
constexpr uint64_t kMaxFixedBufferBytes = kGiB;
constexpr uint64_t kWakeTag = ~uint64_t{0};

std::string memlock_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0) return "unknown";
  return limit.rlim_cur == RLIM_INFINITY ? "unlimited" : format_bytes(limit.rlim_cur);
}

std::string uring_setup_hint(int errno_value) {
  switch (errno_value) {
    case ENOSYS: return ": this kernel has no io_uring";
    case EPERM: return ": io_uring is disabled (sysctl kernel.io_uring_disabled) or refused by a seccomp filter";
    case ENOMEM: return cat(": RLIMIT_MEMLOCK is ", memlock_limit(), " (kernels before 5.12 charge rings to it)");
    default: return "";
  }
}

// Ring flags, best first; a kernel that does not know one answers EINVAL and the next is tried.
constexpr unsigned kRingFlags[] = {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
                                   IORING_SETUP_COOP_TASKRUN, 0};

class UringBlockIo final : public BlockIo {
 public:
  UringBlockIo(const BlockFile& file, const UringOptions& options)
      : file_(file),
        queue_depth_(std::max(1u, options.queue_depth)),
        submit_batch_(std::max(1u, options.submit_batch)),
        request_bytes_(detail::usable_request_bytes(options.request_bytes, file.alignment)),
        fixed_(options.fixed_memory),
        require_fixed_(options.require_fixed) {
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
    if (wake_fd_ < 0) throw_errno("cannot create an eventfd for io_uring", errno);
    std::promise<void> ready;
    std::future<void> started = ready.get_future();
    try {
      driver_ = std::thread([this, ready = std::move(ready)]() mutable { run(ready); });
      started.get();
    } catch (...) {
      if (driver_.joinable()) driver_.join();
      ::close(wake_fd_);
      throw;
    }
  }

  ~UringBlockIo() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake();
    driver_.join();
    ::close(wake_fd_);
  }

  void submit(BlockOp op, std::vector<BlockSpan> spans, BlockDone done) override {
    detail::check_spans(spans, file_);
    auto batch = std::make_unique<BlockBatch>(op, std::move(spans), std::move(done), request_bytes_, fence());
    BlockRequest first;
    if (!batch->next(&first)) {
      batch->complete();  // nothing to do
      return;
    }
    {
      std::lock_guard lock(mutex_);
      incoming_.push_back({std::move(batch), first});
    }
    wake();
  }

  std::string describe() const override {
    return cat("io_uring, queue depth ", queue_depth_, ", ", format_bytes(request_bytes_), " requests",
               file_.direct ? ", O_DIRECT" : ", buffered", fixed_.empty() ? ", plain buffers" : ", fixed buffers");
  }

 private:
  struct Queued {
    std::shared_ptr<BlockBatch> batch;
    BlockRequest next;  // taken from the batch, not yet in flight
  };
  // A request on its way: `done` bytes of it moved so far.
  struct InFlight {
    std::shared_ptr<BlockBatch> batch;
    BlockRequest request;
    uint64_t done = 0;
  };

  detail::RequestFence fence() const {
    return fixed_.empty() ? detail::RequestFence{} : detail::RequestFence{fixed_.data(), kMaxFixedBufferBytes};
  }

  void wake() {
    uint64_t one = 1;
    ssize_t ignored = ::write(wake_fd_, &one, sizeof one);  // only fails when the counter is full: awake anyway
    (void)ignored;
  }

  // --- the driver thread ---

  void run(std::promise<void>& ready) {
    try {
      setup();
    } catch (...) {
      ready.set_exception(std::current_exception());
      return;
    }
    ready.set_value();
    slots_.resize(queue_depth_);
    for (unsigned i = queue_depth_; i-- > 0;) free_slots_.push_back(i);
    arm_wake();
    for (;;) {
      if (take_incoming() && todo_.empty() && retry_.empty() && in_flight_ == 0) break;
      fill();
      int rc = io_uring_submit_and_wait(&ring_, 1);
      if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY && rc != -ETIME) fail_queued(-rc);
      reap();
    }
    io_uring_queue_exit(&ring_);
  }

  void setup() {
    int rc = -EINVAL;
    for (unsigned flags : kRingFlags) {
      io_uring_params params{};
      params.flags = flags;
      rc = io_uring_queue_init_params(queue_depth_ + 1, &ring_, &params);  // +1: the wake read
      if (rc != -EINVAL) break;
    }
    if (rc < 0) {
      throw Error(cat("cannot set up io_uring (queue depth ", queue_depth_, ") for ", file_.path, ": ",
                      errno_text(-rc), uring_setup_hint(-rc)),
                  -rc);
    }
    if (!fixed_.empty()) register_fixed();
  }

  void register_fixed() {
    std::vector<iovec> pieces;
    for (uint64_t offset = 0; offset < fixed_.size(); offset += kMaxFixedBufferBytes) {
      pieces.push_back({fixed_.data() + offset, std::min<uint64_t>(kMaxFixedBufferBytes, fixed_.size() - offset)});
    }
    int rc = io_uring_register_buffers(&ring_, pieces.data(), static_cast<unsigned>(pieces.size()));
    if (rc == 0) return;
    std::string why = cat("cannot register ", format_bytes(fixed_.size()), " as ", pieces.size(),
                          " io_uring fixed buffers: ", errno_text(-rc),
                          rc == -ENOMEM ? cat(" (RLIMIT_MEMLOCK is ", memlock_limit(),
                                              ": raise it, e.g. LimitMEMLOCK=infinity or ulimit -l unlimited)")
                                        : "");
    if (require_fixed_) {
      io_uring_queue_exit(&ring_);
      throw Error(why, -rc);
    }
    log::warn_once("uring-fixed-buffers", why + "; using plain buffers");
    fixed_ = {};
  }

  // Moves submitted batches to the driver's queue. Returns whether the owner is stopping.
  bool take_incoming() {
    std::lock_guard lock(mutex_);
    for (auto& [batch, first] : incoming_) todo_.push_back({std::shared_ptr<BlockBatch>(std::move(batch)), first});
    incoming_.clear();
    return stopping_;
  }

  bool next_request(InFlight* item) {
    if (!retry_.empty()) {
      *item = std::move(retry_.front());
      retry_.pop_front();
      return true;
    }
    if (todo_.empty()) return false;
    Queued& front = todo_.front();
    *item = {front.batch, front.next, 0};
    if (!front.batch->next(&front.next)) todo_.pop_front();
    return true;
  }

  // Fills the queue up to queue_depth requests, submitting every submit_batch of them.
  void fill() {
    unsigned prepared = 0;
    InFlight item;
    while (in_flight_ < queue_depth_ && next_request(&item)) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) {  // cannot happen (entries > queue depth); harmless if it did
        retry_.push_front(std::move(item));
        break;
      }
      unsigned slot = free_slots_.back();
      free_slots_.pop_back();
      slots_[slot] = std::move(item);
      prepare(sqe, slot);
      ++in_flight_;
      if (++prepared % submit_batch_ == 0) io_uring_submit(&ring_);
    }
  }

  void prepare(io_uring_sqe* sqe, unsigned slot) {
    const InFlight& item = slots_[slot];
    std::byte* data = item.request.data + item.done;
    const unsigned bytes = static_cast<unsigned>(item.request.bytes - item.done);
    const uint64_t offset = item.request.offset + item.done;
    const bool read = item.batch->op() == BlockOp::kRead;
    if (!fixed_.empty() && data >= fixed_.data() && data + bytes <= fixed_.data() + fixed_.size()) {
      int index = static_cast<int>(static_cast<uint64_t>(data - fixed_.data()) / kMaxFixedBufferBytes);
      if (read) {
        io_uring_prep_read_fixed(sqe, file_.fd, data, bytes, offset, index);
      } else {
        io_uring_prep_write_fixed(sqe, file_.fd, data, bytes, offset, index);
      }
    } else if (read) {
      io_uring_prep_read(sqe, file_.fd, data, bytes, offset);
    } else {
      io_uring_prep_write(sqe, file_.fd, data, bytes, offset);
    }
    io_uring_sqe_set_data64(sqe, slot);
  }

  void arm_wake() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    io_uring_prep_read(sqe, wake_fd_, &wake_value_, sizeof wake_value_, 0);
    io_uring_sqe_set_data64(sqe, kWakeTag);
  }

  // Reaps every completion there is, in batches, then completes the batches that finished.
  void reap() {
    std::vector<std::shared_ptr<BlockBatch>> finished;
    io_uring_cqe* cqes[64];
    while (unsigned count = io_uring_peek_batch_cqe(&ring_, cqes, 64)) {
      for (unsigned i = 0; i < count; ++i) {
        const uint64_t tag = io_uring_cqe_get_data64(cqes[i]);
        if (tag == kWakeTag) {
          arm_wake();
        } else {
          handle(static_cast<unsigned>(tag), cqes[i]->res, finished);
        }
      }
      io_uring_cq_advance(&ring_, count);
    }
    for (const std::shared_ptr<BlockBatch>& batch : finished) batch->complete();
  }

  void handle(unsigned slot, int result, std::vector<std::shared_ptr<BlockBatch>>& finished) {
    InFlight item = std::move(slots_[slot]);
    free_slots_.push_back(slot);
    --in_flight_;
    const uint64_t offset = item.request.offset + item.done;
    const uint64_t left = item.request.bytes - item.done;
    if (result == -EAGAIN || result == -EINTR) {
      retry_.push_back(std::move(item));
      return;
    }
    if (result > 0 && static_cast<uint64_t>(result) < left) {
      item.done += static_cast<uint64_t>(result);  // short: continue from where it stopped
      const uint64_t stopped = item.request.offset + item.done;
      if (!(file_.direct && item.batch->op() == BlockOp::kRead && stopped % file_.alignment != 0)) {
        retry_.push_front(std::move(item));
        return;
      }
      // A direct read ends short off the alignment only at the end of the file; continuing from
      // there would be refused (EINVAL) and hide why.
      const uint64_t rest = item.request.bytes - item.done;
      if (item.batch->fail(item.request, stopped, rest, 0,
                           detail::block_error_message(BlockOp::kRead, file_.path, stopped, rest, 0))) {
        finished.push_back(std::move(item.batch));
      }
      return;
    }
    bool last;
    if (result > 0) {
      last = item.batch->finish(item.request);
    } else {
      int error = -result;  // 0 when the read hit the end of the file
      last = item.batch->fail(item.request, offset, left, error,
                              detail::block_error_message(item.batch->op(), file_.path, offset, left, error));
    }
    if (last) finished.push_back(std::move(item.batch));
  }

  // io_uring_enter itself failed (not a request): nothing queued can be submitted. Every request
  // not yet in flight fails with its errno; those in flight still complete.
  void fail_queued(int errno_value) {
    std::vector<std::shared_ptr<BlockBatch>> finished;
    InFlight item;
    while (next_request(&item)) {
      const uint64_t offset = item.request.offset + item.done;
      const uint64_t left = item.request.bytes - item.done;
      std::string message = cat(detail::block_error_message(item.batch->op(), file_.path, offset, left, errno_value),
                                " (io_uring_enter)");
      if (item.batch->fail(item.request, offset, left, errno_value, std::move(message))) {
        finished.push_back(item.batch);
      }
    }
    for (const std::shared_ptr<BlockBatch>& batch : finished) batch->complete();
  }

  const BlockFile file_;
  const unsigned queue_depth_;
  const unsigned submit_batch_;
  const uint64_t request_bytes_;
  std::span<std::byte> fixed_;  // empty when not registered
  const bool require_fixed_;
  int wake_fd_ = -1;

  std::mutex mutex_;  // guards incoming_ and stopping_
  struct Incoming {
    std::unique_ptr<BlockBatch> batch;
    BlockRequest first;
  };
  std::vector<Incoming> incoming_;
  bool stopping_ = false;

  // The driver thread's own state.
  io_uring ring_{};
  uint64_t wake_value_ = 0;
  std::deque<Queued> todo_;
  std::deque<InFlight> retry_;
  std::vector<InFlight> slots_;
  std::vector<unsigned> free_slots_;
  unsigned in_flight_ = 0;
  std::thread driver_;  // last: started once everything above exists
};

}  // namespace

std::unique_ptr<BlockIo> make_uring_block_io(const BlockFile& file, const UringOptions& options) {
  return std::make_unique<UringBlockIo>(file, options);
}

}  // namespace hugepin
