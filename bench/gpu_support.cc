#include "bench/gpu_support.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include "base/error.h"
#include "base/size.h"
#include "dma/cuda_check.h"
#include "hugemem/arena.h"

namespace hugepin::bench {
namespace {

// Times the work `enqueue` puts on `streams` with events, after a device-wide sync.
template <typename Enqueue>
double timed(int stream_count, Enqueue enqueue) {
  cudaStream_t streams[2] = {};
  for (int i = 0; i < stream_count; ++i) check_cuda(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking), "stream");
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  check_cuda(cudaEventCreate(&start), "event");
  check_cuda(cudaEventCreate(&stop), "event");
  check_cuda(cudaDeviceSynchronize(), "sync");
  check_cuda(cudaEventRecord(start, streams[0]), "record");
  for (int i = 1; i < stream_count; ++i) check_cuda(cudaStreamWaitEvent(streams[i], start, 0), "wait");
  enqueue(streams);
  for (int i = 1; i < stream_count; ++i) {
    cudaEvent_t joined = nullptr;
    check_cuda(cudaEventCreateWithFlags(&joined, cudaEventDisableTiming), "event");
    check_cuda(cudaEventRecord(joined, streams[i]), "record");
    check_cuda(cudaStreamWaitEvent(streams[0], joined, 0), "wait");
    cudaEventDestroy(joined);
  }
  check_cuda(cudaEventRecord(stop, streams[0]), "record");
  check_cuda(cudaEventSynchronize(stop), "sync");
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, start, stop), "elapsed");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  for (int i = 0; i < stream_count; ++i) cudaStreamDestroy(streams[i]);
  return ms / 1000.0;
}

}  // namespace

double contiguous_copy(void* device, void* host, uint64_t bytes, bool host_to_device) {
  return timed(1, [&](cudaStream_t* streams) {
    check_cuda(host_to_device ? cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, streams[0])
                         : cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, streams[0]),
          "cudaMemcpyAsync");
  });
}

double contiguous_both(void* device, void* host, uint64_t bytes) {
  return timed(2, [&](cudaStream_t* streams) {
    auto* d = static_cast<char*>(device);
    auto* h = static_cast<char*>(host);
    check_cuda(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, streams[0]), "cudaMemcpyAsync");
    check_cuda(cudaMemcpyAsync(h + bytes, d + bytes, bytes, cudaMemcpyDeviceToHost, streams[1]), "cudaMemcpyAsync");
  });
}

MappedRegion scratch_region(std::string_view tag, uint64_t bytes, uint64_t page_size, const std::string& hugetlbfs_dir) {
  ArenaOptions arena;
  arena.page_size = page_size;
  arena.hugetlbfs_dir = hugetlbfs_dir;
  const std::string name = cat("bench-", tag, "-", getpid());
  create_arena(real_os(), name, {{0, bytes, -1}}, arena);
  MappedRegion region = open_region(real_os(), name, 0, true, arena);
  destroy_arena(real_os(), name, arena);
  return region;
}

}  // namespace hugepin::bench
