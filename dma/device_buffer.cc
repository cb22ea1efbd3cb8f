#include "dma/device_buffer.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "base/error.h"
#include "base/size.h"
#include "dma/cuda_check.h"

namespace hugepin {
DeviceBuffer::DeviceBuffer(int device, uint64_t bytes) : device_(device), bytes_(bytes) {
  check_cuda(cudaSetDevice(device), cat("selecting GPU ", device));
  check_cuda(cudaMalloc(&data_, bytes), cat("allocating ", format_bytes(bytes), " on GPU ", device));
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ == nullptr) return;
  cudaSetDevice(device_);
  cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) {
      cudaSetDevice(device_);
      cudaFree(data_);
    }
    device_ = other.device_;
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::fill(int byte) {
  check_cuda(cudaSetDevice(device_), cat("selecting GPU ", device_));
  check_cuda(cudaMemset(data_, byte, bytes_), "cudaMemset");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

void copy_to_device(int device, uint64_t device_address, const void* host, size_t bytes) {
  check_cuda(cudaSetDevice(device), cat("selecting GPU ", device));
  check_cuda(cudaMemcpy(reinterpret_cast<void*>(device_address), host, bytes, cudaMemcpyHostToDevice),
        cat("copying ", format_bytes(bytes), " to GPU ", device));
  // From pageable memory cudaMemcpy may return once the bytes are staged, before they land; work
  // on other (non-blocking) streams must not see the old bytes (seen on the H200 host: the
  // demo's stores copied stale blocks). Wait for the device.
  check_cuda(cudaDeviceSynchronize(), cat("waiting for a copy to GPU ", device));
}

void copy_from_device(int device, void* host, uint64_t device_address, size_t bytes) {
  check_cuda(cudaSetDevice(device), cat("selecting GPU ", device));
  check_cuda(cudaMemcpy(host, reinterpret_cast<const void*>(device_address), bytes, cudaMemcpyDeviceToHost),
        cat("copying ", format_bytes(bytes), " from GPU ", device));
}

}  // namespace hugepin
