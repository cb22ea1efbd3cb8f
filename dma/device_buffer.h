// GPU memory for the tools around the copy engine (the demo's KV cache, the benchmarks): a
// buffer on one device, and synchronous copies to fill or check it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hugepin {

// cudaMalloc'd memory on one device. Move-only; freed when destroyed. In a build without CUDA
// the constructor throws Error.
class DeviceBuffer {
 public:
  DeviceBuffer(int device, uint64_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  uint64_t address() const { return reinterpret_cast<uintptr_t>(data_); }
  uint64_t bytes() const { return bytes_; }
  int device() const { return device_; }
  // Sets every byte to `byte` and waits.
  void fill(int byte);

 private:
  int device_ = 0;
  void* data_ = nullptr;
  uint64_t bytes_ = 0;
};

// Synchronous copies between host memory and device memory (any host memory): the bytes have
// landed when they return, for every stream. Throw Error.
void copy_to_device(int device, uint64_t device_address, const void* host, size_t bytes);
void copy_from_device(int device, void* host, uint64_t device_address, size_t bytes);

}  // namespace hugepin
