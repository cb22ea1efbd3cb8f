// The pread/pwrite BlockIo: a fixed set of threads taking requests in submission order.
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "base/size.h"
#include "disk/block_io.h"
#include "disk/detail/block_batch.h"

namespace hugepin {
namespace {

using detail::BlockBatch;
using detail::BlockRequest;

class ThreadPoolBlockIo final : public BlockIo {
 public:
  ThreadPoolBlockIo(Os& os, const BlockFile& file, const ThreadPoolOptions& options)
      : os_(os), file_(file), request_bytes_(detail::usable_request_bytes(options.request_bytes, file.alignment)) {
    const unsigned threads = std::max(1u, options.threads);
    for (unsigned i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
  }

  ~ThreadPoolBlockIo() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    work_ready_.notify_all();
    for (std::thread& thread : threads_) thread.join();
  }

  void submit(BlockOp op, std::vector<BlockSpan> spans, BlockDone done) override {
    detail::check_spans(spans, file_);
    auto batch = std::make_shared<BlockBatch>(op, std::move(spans), std::move(done), request_bytes_,
                                              detail::RequestFence{});
    BlockRequest none;
    if (!batch->next(&none)) {
      batch->complete();  // nothing to do
      return;
    }
    {
      std::lock_guard lock(mutex_);
      queue_.push_back({batch, none});
    }
    work_ready_.notify_all();
  }

  std::string describe() const override {
    return cat("pread/pwrite, ", threads_.size(), " threads, ", format_bytes(request_bytes_), " requests",
               file_.direct ? ", O_DIRECT" : ", buffered");
  }

 private:
  // A batch with requests left to hand out, and its first request already taken from it.
  struct Queued {
    std::shared_ptr<BlockBatch> batch;
    BlockRequest first;
  };

  // Takes the next request in submission order; false when stopping with nothing left.
  bool take(std::shared_ptr<BlockBatch>* batch, BlockRequest* request) {
    std::unique_lock lock(mutex_);
    work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return false;
    Queued& front = queue_.front();
    *batch = front.batch;
    *request = front.first;
    if (!front.batch->next(&front.first)) queue_.pop_front();
    return true;
  }

  void work() {
    std::shared_ptr<BlockBatch> batch;
    BlockRequest request;
    while (take(&batch, &request)) {
      bool last = transfer(*batch, request);
      if (last) batch->complete();
      batch.reset();
    }
  }

  // Moves one request, continuing after short transfers. Returns whether it was its batch's
  // last outstanding request.
  bool transfer(BlockBatch& batch, const BlockRequest& request) {
    uint64_t done = 0;
    int error = 0;
    while (done < request.bytes) {
      std::byte* data = request.data + done;
      const uint64_t offset = request.offset + done;
      const uint64_t left = request.bytes - done;
      ssize_t n = batch.op() == BlockOp::kRead ? os_.pread(file_.fd, data, left, offset)
                                               : os_.pwrite(file_.fd, data, left, offset);
      if (n == -EINTR || n == -EAGAIN) continue;
      if (n <= 0) {
        error = n < 0 ? static_cast<int>(-n) : 0;
        std::lock_guard lock(mutex_);
        return batch.fail(request, offset, left, error,
                          detail::block_error_message(batch.op(), file_.path, offset, left, error));
      }
      done += static_cast<uint64_t>(n);
      if (done < request.bytes && file_.direct && batch.op() == BlockOp::kRead &&
          (request.offset + done) % file_.alignment != 0) {
        // A direct read ends short off the alignment only at the end of the file; continuing
        // from there would be refused (EINVAL) and hide why: report the short file (as io_uring does).
        const uint64_t stopped = request.offset + done;
        const uint64_t rest = request.bytes - done;
        std::lock_guard lock(mutex_);
        return batch.fail(request, stopped, rest, 0, detail::block_error_message(BlockOp::kRead, file_.path, stopped, rest, 0));
      }
    }
    std::lock_guard lock(mutex_);
    return batch.finish(request);
  }

  Os& os_;
  const BlockFile file_;
  const uint64_t request_bytes_;
  std::mutex mutex_;  // guards queue_, stopping_ and every batch's bookkeeping
  std::condition_variable work_ready_;
  std::deque<Queued> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;  // last: started once everything above exists
};

}  // namespace

std::unique_ptr<BlockIo> make_thread_pool_block_io(Os& os, const BlockFile& file, const ThreadPoolOptions& options) {
  return std::make_unique<ThreadPoolBlockIo>(os, file, options);
}

}  // namespace hugepin
