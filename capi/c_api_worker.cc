// The C ABI of workers: WorkerSession (session/worker_session.h) behind hugepin_worker.
#include <cerrno>

#include "capi/c_api_guard.h"
#include "capi/c_api_handles.h"
#include "capi/c_api_worker_options.h"
#include "hugepin/hugepin.h"

using hugepin::capi::guarded;
using hugepin::capi::require;

namespace {

hugepin::WorkerSession& session_of(hugepin_worker* worker) {
  require(worker, "worker");
  return *worker->session;
}

const hugepin::WorkerSession& session_of(const hugepin_worker* worker) {
  require(worker, "worker");
  return *worker->session;
}

std::span<const hugepin::BlockPair> pairs_of(const hugepin_block_pair* pairs, size_t count) {
  static_assert(sizeof(hugepin_block_pair) == sizeof(hugepin::BlockPair));
  if (count != 0) require(pairs, "pairs");
  return {reinterpret_cast<const hugepin::BlockPair*>(pairs), count};
}

}  // namespace

extern "C" {

int hugepin_worker_attach(const char* arena, uint32_t tp_rank, uint32_t pp_rank, const hugepin_worker_options* options,
                          hugepin_worker** out) {
  return guarded([&] {
    require(arena, "arena");
    require(out, "out");
    const hugepin_worker_options given =
        hugepin::capi::read_options(options, hugepin_worker_options HUGEPIN_WORKER_OPTIONS_INIT, "hugepin_worker_options");
    const hugepin::WorkerSessionOptions session_options = hugepin::capi::worker_session_options(given);
    hugepin::check_arena_name(arena);
    auto worker = std::make_unique<hugepin_worker>();
    worker->session =
        std::make_unique<hugepin::WorkerSession>(hugepin::real_os(), arena, tp_rank, pp_rank, session_options);
    *out = worker.release();
    return 0;
  });
}

int hugepin_worker_detach(hugepin_worker* worker) {
  if (worker == nullptr) return 0;
  const int rc = guarded([&] {
    worker->session->detach();
    return 0;
  });
  delete worker;  // the session's destructor finishes what detach could not, and logs it
  return rc;
}

int hugepin_worker_pin(hugepin_worker* worker, int device) {
  return guarded([&] {
    session_of(worker).pin(device);
    return 0;
  });
}

int hugepin_worker_get_region(const hugepin_worker* worker, hugepin_region_info* out) {
  return guarded([&] {
    require(out, "out");
    const hugepin::WorkerSession& session = session_of(worker);
    const hugepin::RegionInfo region = session.region();
    *out = {region.base, region.bytes, region.page_size, region.numa_node, region.pinned ? 1 : 0, region.device,
            region.rank, static_cast<uint32_t>(session.rank_geometry().segments.size())};
    return 0;
  });
}

int hugepin_worker_get_segment(const hugepin_worker* worker, uint32_t index, hugepin_segment_info* out) {
  return guarded([&] {
    require(out, "out");
    const hugepin::WorkerSession& session = session_of(worker);
    const hugepin::RankGeometry& rank = session.rank_geometry();
    if (index >= rank.segments.size()) {
      throw hugepin::Error(hugepin::cat("segment ", index, " is out of range (rank ", rank.rank, " has ",
                                        rank.segments.size(), ")"), ERANGE);
    }
    const hugepin::SegmentGeometry& segment = rank.segments[index];
    *out = {segment.bytes_per_block, segment.host_offset, segment.host_block_stride, session.geometry().host_blocks()};
    return 0;
  });
}

int hugepin_worker_set_device_kv(hugepin_worker* worker, const hugepin_device_segment* segments, size_t count,
                                 hugepin_backend backend) {
  return guarded([&] {
    hugepin::WorkerSession& session = session_of(worker);
    if (count != 0) require(segments, "segments");
    if (backend != HUGEPIN_BACKEND_AUTO && backend != HUGEPIN_BACKEND_GPU && backend != HUGEPIN_BACKEND_HOST) {
      throw hugepin::Error(hugepin::cat("backend ", static_cast<int>(backend), " is not a hugepin_backend"), EINVAL);
    }
    std::vector<hugepin::DeviceSegment> device;
    for (size_t i = 0; i < count; ++i) {
      device.push_back({segments[i].device_base, segments[i].block_stride, segments[i].blocks,
                        segments[i].bytes_per_block});
    }
    session.set_device_kv(device, static_cast<hugepin::WorkerBackend>(backend));
    return 0;
  });
}

int hugepin_worker_store(hugepin_worker* worker, hugepin_job_id job, const hugepin_block_pair* pairs, size_t count,
                         void* stream) {
  return guarded([&] {
    session_of(worker).store(job, pairs_of(pairs, count), stream);
    return 0;
  });
}

int hugepin_worker_load(hugepin_worker* worker, hugepin_job_id job, const hugepin_block_pair* pairs, size_t count,
                        void* stream) {
  return guarded([&] {
    session_of(worker).load(job, pairs_of(pairs, count), stream);
    return 0;
  });
}

int hugepin_worker_post_done(hugepin_worker* worker, hugepin_job_id job, int error) {
  return guarded([&] {
    hugepin::WorkerSession& session = session_of(worker);
    if (job == 0) throw hugepin::Error("job id 0: job ids start at 1", EINVAL);
    if (error < 0) throw hugepin::Error(hugepin::cat("error = ", error, ": give 0 or a positive errno"), EINVAL);
    session.post_job_done(job, error);
    return 0;
  });
}

int hugepin_worker_release(hugepin_worker* worker, hugepin_epoch epoch, void* stream) {
  return guarded([&] {
    session_of(worker).release(epoch, stream);
    return 0;
  });
}

int hugepin_worker_heartbeat(hugepin_worker* worker) {
  return guarded([&] {
    session_of(worker).heartbeat();
    return 0;
  });
}

int hugepin_worker_finished(hugepin_worker* worker, hugepin_job_result* out, size_t capacity, size_t* count) {
  return guarded([&] {
    hugepin::WorkerSession& session = session_of(worker);
    require(count, "count");
    if (capacity != 0) require(out, "out");
    worker->finished.clear();
    session.take_finished(&worker->finished, capacity);
    for (size_t i = 0; i < worker->finished.size(); ++i) {
      const hugepin::JobResult& result = worker->finished[i];
      out[i] = {result.job,
                -result.error,
                static_cast<uint32_t>(result.kind),
                result.bytes,
                static_cast<uint64_t>(result.launch_ns),
                static_cast<uint64_t>(result.landed_ns),
                static_cast<uint64_t>(result.copy_ns),
                static_cast<uint64_t>(result.gpu_done_ns)};
    }
    *count = worker->finished.size();
    return 0;
  });
}

int hugepin_worker_wait(hugepin_worker* worker, hugepin_job_id job, int64_t timeout_ns) {
  return guarded([&] {
    if (session_of(worker).wait(job, timeout_ns)) return 0;
    return hugepin::capi::fail(ETIMEDOUT, hugepin::cat("job ", job, " has not landed after ", timeout_ns, " ns"));
  });
}

int hugepin_worker_completion_fd(hugepin_worker* worker, int* fd) {
  return guarded([&] {
    require(fd, "fd");
    *fd = session_of(worker).completion_fd();
    return 0;
  });
}

}  // extern "C"
