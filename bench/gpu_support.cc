#include "bench/gpu_support.h"

#include <cuda_runtime_api.h>

#include "base/error.h"
#include "base/size.h"

namespace hugepin::bench {
namespace {

void check(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return;
  (void)cudaGetLastError();
  throw Error(cat(what, ": ", cudaGetErrorName(error), ": ", cudaGetErrorString(error)));
}

// Times the work `enqueue` puts on `streams` with events, after a device-wide sync.
template <typename Enqueue>
double timed(int stream_count, Enqueue enqueue) {
  cudaStream_t streams[2] = {};
  for (int i = 0; i < stream_count; ++i) check(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking), "stream");
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  check(cudaDeviceSynchronize(), "sync");
  check(cudaEventRecord(start, streams[0]), "record");
  for (int i = 1; i < stream_count; ++i) check(cudaStreamWaitEvent(streams[i], start, 0), "wait");
  enqueue(streams);
  for (int i = 1; i < stream_count; ++i) {
    cudaEvent_t joined = nullptr;
    check(cudaEventCreateWithFlags(&joined, cudaEventDisableTiming), "event");
    check(cudaEventRecord(joined, streams[i]), "record");
    check(cudaStreamWaitEvent(streams[0], joined, 0), "wait");
    cudaEventDestroy(joined);
  }
  check(cudaEventRecord(stop, streams[0]), "record");
  check(cudaEventSynchronize(stop), "sync");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  for (int i = 0; i < stream_count; ++i) cudaStreamDestroy(streams[i]);
  return ms / 1000.0;
}

}  // namespace

double contiguous_copy(void* device, void* host, uint64_t bytes, bool host_to_device) {
  return timed(1, [&](cudaStream_t* streams) {
    check(host_to_device ? cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, streams[0])
                         : cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, streams[0]),
          "cudaMemcpyAsync");
  });
}

double contiguous_both(void* device, void* host, uint64_t bytes) {
  return timed(2, [&](cudaStream_t* streams) {
    auto* d = static_cast<char*>(device);
    auto* h = static_cast<char*>(host);
    check(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, streams[0]), "cudaMemcpyAsync");
    check(cudaMemcpyAsync(h + bytes, d + bytes, bytes, cudaMemcpyDeviceToHost, streams[1]), "cudaMemcpyAsync");
  });
}

}  // namespace hugepin::bench
