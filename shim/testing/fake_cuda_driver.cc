// A fake CUDA driver for the shim's tests, built as libcuda.so.1: the pinned-host entry points
// of the driver API over the same bookkeeping as the fake runtime (fake_host_memory.h). Calls
// before cuInit fail with CUDA_ERROR_NOT_INITIALIZED, as the real driver's do. The fakecu_*
// functions let test programs inspect and steer it.
#include <atomic>
#include <cstring>
#include <string>

#include "shim/cuda_abi.h"
#include "shim/testing/fake_host_memory.h"

namespace {

using namespace hugepin;

fake::HostMemory& memory() {
  static fake::HostMemory instance;
  return instance;
}

std::atomic<bool> g_initialized{false};

// Counts the call; returns the injected failure, CUDA_ERROR_NOT_INITIALIZED before cuInit, or 0.
int enter(const char* function) {
  if (int injected = memory().enter(function)) return injected;
  return g_initialized ? cuda::kDriverSuccess : cuda::kDriverErrorNotInitialized;
}

}  // namespace

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_EXPORT int cuInit(unsigned int flags) {
  if (int injected = memory().enter("cuInit")) return injected;
  if (flags != 0) return cuda::kDriverErrorInvalidValue;
  g_initialized = true;
  return cuda::kDriverSuccess;
}

FAKE_EXPORT int cuMemHostAlloc(void** ptr, size_t size, unsigned int flags) {
  if (int error = enter("cuMemHostAlloc")) return error;
  if ((flags & ~0x07u) != 0) return cuda::kDriverErrorInvalidValue;
  return memory().allocate(ptr, size, flags);
}

FAKE_EXPORT int cuMemAllocHost_v2(void** ptr, size_t size) {
  if (int error = enter("cuMemAllocHost_v2")) return error;
  return memory().allocate(ptr, size, 0);
}

FAKE_EXPORT int cuMemFreeHost(void* ptr) {
  if (int error = enter("cuMemFreeHost")) return error;
  return memory().free(ptr);
}

FAKE_EXPORT int cuMemHostRegister_v2(void* ptr, size_t size, unsigned int flags) {
  if (int error = enter("cuMemHostRegister_v2")) return error;
  if ((flags & ~0x0fu) != 0) return cuda::kDriverErrorInvalidValue;
  return memory().register_range(ptr, size, flags);
}

FAKE_EXPORT int cuMemHostUnregister(void* ptr) {
  if (int error = enter("cuMemHostUnregister")) return error;
  return memory().unregister(ptr);
}

FAKE_EXPORT int cuMemHostGetFlags(unsigned int* flags, void* host) {
  if (int error = enter("cuMemHostGetFlags")) return error;
  return memory().allocation_flags(host, flags);
}

FAKE_EXPORT int cuMemHostGetDevicePointer_v2(unsigned long long* device, void* host, unsigned int flags) {
  if (int error = enter("cuMemHostGetDevicePointer_v2")) return error;
  if (flags != 0) return cuda::kDriverErrorInvalidValue;
  void* pointer = nullptr;
  int rc = memory().device_pointer(host, cuda::kMemHostRegisterDeviceMap, &pointer);
  if (rc == cuda::kDriverSuccess) *device = reinterpret_cast<unsigned long long>(pointer);
  return rc;
}

FAKE_EXPORT int cuCtxGetDevice(int* device) {
  if (int error = enter("cuCtxGetDevice")) return error;
  if (device == nullptr) return cuda::kDriverErrorInvalidValue;
  *device = fake::fake_device();
  return cuda::kDriverSuccess;
}

FAKE_EXPORT int cuDeviceGetPCIBusId(char* id, int length, int device) {
  if (int error = enter("cuDeviceGetPCIBusId")) return error;
  std::string bus_id = fake::fake_pci_bus_id();
  if (id == nullptr || length <= static_cast<int>(bus_id.size()) || device != fake::fake_device()) {
    return cuda::kDriverErrorInvalidValue;
  }
  std::memcpy(id, bus_id.c_str(), bus_id.size() + 1);
  return cuda::kDriverSuccess;
}

// --- control and inspection, for test programs ---

FAKE_EXPORT int fakecu_calls(const char* function) { return memory().calls(function); }
FAKE_EXPORT void fakecu_fail(const char* function, int code, int nth) { memory().fail(function, code, nth); }
FAKE_EXPORT int fakecu_live_allocations() { return static_cast<int>(memory().live_allocations()); }
FAKE_EXPORT int fakecu_live_registrations() { return static_cast<int>(memory().live_registrations()); }
FAKE_EXPORT int fakecu_registration(const void* ptr, size_t* size, unsigned* flags) {
  return memory().registration(ptr, size, flags) ? 1 : 0;
}
