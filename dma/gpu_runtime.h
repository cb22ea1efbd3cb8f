// The one seam between hugepin and the GPU driver, for what pinning needs (leveldb's Env for
// the GPU): tests substitute a fake that fails where they choose, on machines with no GPU.
//
// Contract of every method: returns 0 or a nonzero runtime error code, never throws, and leaves
// no error state behind in the runtime (the CUDA implementation clears its last error).
// Implementations are thread-safe; each call applies to `device`.
#pragma once

#include <cstddef>
#include <string>

namespace hugepin {

class GpuRuntime {
 public:
  virtual ~GpuRuntime() = default;

  virtual int device_count(int* count) = 0;
  // Page-locks [addr, addr + bytes) and maps it for `device` (cudaHostRegister, Portable|Mapped).
  virtual int host_register(int device, void* addr, size_t bytes) = 0;
  virtual int host_unregister(int device, void* addr) = 0;
  // The device address of registered host memory (equal to the host address under UVA).
  virtual int device_pointer(int device, void* host, void** device_ptr) = 0;
  // "0000:17:00.0": the PCI address of `device`.
  virtual int pci_bus_id(int device, std::string* out) = 0;
  // "cudaErrorMemoryAllocation: out of memory".
  virtual std::string error_text(int code) = 0;
};

// The CUDA runtime, or null when this build has no CUDA. Lives for the whole process.
GpuRuntime* cuda_runtime();

}  // namespace hugepin
