// Small CUDA helpers for the GPU benchmarks: a device buffer and timed contiguous copies.
// Built only with CUDA.
#pragma once

#include <cstdint>

namespace hugepin::bench {

// cudaMalloc'd memory on one device. Move-only; freed when destroyed.
class DeviceBuffer {
 public:
  DeviceBuffer(int device, uint64_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  uint64_t address() const { return reinterpret_cast<uintptr_t>(data_); }
  uint64_t bytes() const { return bytes_; }
  void fill(int byte);

 private:
  int device_;
  void* data_ = nullptr;
  uint64_t bytes_;
};

// Seconds for one cudaMemcpyAsync of `bytes` between `device` and `host` (pinned), on a fresh
// stream, measured with events.
double contiguous_copy(void* device, void* host, uint64_t bytes, bool host_to_device);
// Seconds for both directions at once, each on its own stream, over halves of nothing shared:
// device[0, bytes) <- host[0, bytes) while host[bytes, 2 bytes) <- device[bytes, 2 bytes).
double contiguous_both(void* device, void* host, uint64_t bytes);

}  // namespace hugepin::bench
