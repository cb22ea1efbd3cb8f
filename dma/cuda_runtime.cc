// The CUDA implementation of the GPU seam (runtime API, linked statically: a machine without a
// driver gets an error code, not a failure to start).
#include <cuda_runtime_api.h>

#include "dma/gpu_runtime.h"

namespace hugepin {
namespace {

// Returns `error` after clearing the runtime's last error, so nothing is left for a later call.
int cleared(cudaError_t error) {
  if (error != cudaSuccess) (void)cudaGetLastError();
  return static_cast<int>(error);
}

class CudaRuntime final : public GpuRuntime {
 public:
  int device_count(int* count) override {
    *count = 0;
    return cleared(cudaGetDeviceCount(count));
  }
  int host_register(int device, void* addr, size_t bytes) override {
    if (cudaError_t error = cudaSetDevice(device); error != cudaSuccess) return cleared(error);
    return cleared(cudaHostRegister(addr, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped));
  }
  int host_unregister(int device, void* addr) override {
    if (cudaError_t error = cudaSetDevice(device); error != cudaSuccess) return cleared(error);
    return cleared(cudaHostUnregister(addr));
  }
  int device_pointer(int device, void* host, void** device_ptr) override {
    if (cudaError_t error = cudaSetDevice(device); error != cudaSuccess) return cleared(error);
    return cleared(cudaHostGetDevicePointer(device_ptr, host, 0));
  }
  int pci_bus_id(int device, std::string* out) override {
    char id[32] = {};
    int rc = cleared(cudaDeviceGetPCIBusId(id, sizeof id, device));
    if (rc == 0) *out = id;
    return rc;
  }
  std::string error_text(int code) override {
    auto error = static_cast<cudaError_t>(code);
    return std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
  }
};

}  // namespace

GpuRuntime* cuda_runtime() {
  static CudaRuntime runtime;
  return &runtime;
}

}  // namespace hugepin
