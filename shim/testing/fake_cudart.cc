// A fake CUDA runtime for the shim's tests: built as libcudart.so.13 with the real library's
// version node (fake_cudart.map), so that programs linked against it reference
// `cudaHostAlloc@libcudart.so.13` exactly as PyTorch's libraries reference the real one.
//
// Minimal but truthful (fake_host_memory.h): pinned allocations and registrations are tracked,
// overlaps refused, unknown pointers refused, failures injectable, and each failing call sets the
// calling thread's last error as the real runtime does. The fakecuda_* functions let test
// programs inspect and steer it.
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

thread_local int t_last_error = cuda::kSuccess;

// Records a failure as the thread's last error (the runtime's non-sticky error state).
int result(int code) {
  if (code != cuda::kSuccess) t_last_error = code;
  return code;
}

// Counts the call; returns the injected failure, or kSuccess to go on.
int enter(const char* function) { return memory().enter(function); }

}  // namespace

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_EXPORT int cudaHostAlloc(void** ptr, size_t size, unsigned int flags) {
  if (int injected = enter("cudaHostAlloc")) return result(injected);
  if ((flags & ~cuda::kHostAllocKnownFlags) != 0) return result(cuda::kErrorInvalidValue);
  return result(memory().allocate(ptr, size, flags));
}

FAKE_EXPORT int cudaMallocHost(void** ptr, size_t size) {
  if (int injected = enter("cudaMallocHost")) return result(injected);
  return result(memory().allocate(ptr, size, 0));
}

FAKE_EXPORT int cudaFreeHost(void* ptr) {
  if (int injected = enter("cudaFreeHost")) return result(injected);
  return result(memory().free(ptr));
}

FAKE_EXPORT int cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  if (int injected = enter("cudaHostRegister")) return result(injected);
  if ((flags & ~0x0fu) != 0) return result(cuda::kErrorInvalidValue);
  return result(memory().register_range(ptr, size, flags));
}

FAKE_EXPORT int cudaHostUnregister(void* ptr) {
  if (int injected = enter("cudaHostUnregister")) return result(injected);
  return result(memory().unregister(ptr));
}

FAKE_EXPORT int cudaHostGetFlags(unsigned int* flags, void* host) {
  if (int injected = enter("cudaHostGetFlags")) return result(injected);
  return result(memory().allocation_flags(host, flags));
}

FAKE_EXPORT int cudaHostGetDevicePointer(void** device, void* host, unsigned int flags) {
  if (int injected = enter("cudaHostGetDevicePointer")) return result(injected);
  if (flags != 0) return result(cuda::kErrorInvalidValue);
  return result(memory().device_pointer(host, cuda::kHostRegisterMapped, device));
}

FAKE_EXPORT int cudaGetDevice(int* device) {
  if (int injected = enter("cudaGetDevice")) return result(injected);
  if (device == nullptr) return result(cuda::kErrorInvalidValue);
  *device = fake::fake_device();
  return cuda::kSuccess;
}

FAKE_EXPORT int cudaDeviceGetPCIBusId(char* id, int length, int device) {
  if (int injected = enter("cudaDeviceGetPCIBusId")) return result(injected);
  std::string bus_id = fake::fake_pci_bus_id();
  if (id == nullptr || length <= static_cast<int>(bus_id.size()) || device != fake::fake_device()) {
    return result(cuda::kErrorInvalidValue);
  }
  std::memcpy(id, bus_id.c_str(), bus_id.size() + 1);
  return cuda::kSuccess;
}

FAKE_EXPORT int cudaGetLastError() {
  int error = t_last_error;
  t_last_error = cuda::kSuccess;
  return error;
}

FAKE_EXPORT int cudaPeekAtLastError() { return t_last_error; }

FAKE_EXPORT const char* cudaGetErrorString(int error) {
  switch (error) {
    case cuda::kSuccess: return "no error";
    case cuda::kErrorInvalidValue: return "invalid argument";
    case cuda::kErrorMemoryAllocation: return "out of memory";
    case cuda::kErrorInitializationError: return "initialization error";
    case cuda::kErrorHostMemoryAlreadyRegistered: return "part or all of the requested memory range is already mapped";
    case cuda::kErrorHostMemoryNotRegistered: return "pointer does not correspond to a registered memory region";
    default: return "unrecognized error code";
  }
}

// --- control and inspection, for test programs ---

// Calls of `function` so far.
FAKE_EXPORT int fakecuda_calls(const char* function) { return memory().calls(function); }
// Every call of `function` (nth 0), or only the nth from now, returns `code`; code 0 clears.
FAKE_EXPORT void fakecuda_fail(const char* function, int code, int nth) { memory().fail(function, code, nth); }
FAKE_EXPORT int fakecuda_live_allocations() { return static_cast<int>(memory().live_allocations()); }
FAKE_EXPORT int fakecuda_live_registrations() { return static_cast<int>(memory().live_registrations()); }
// 1 and the size and flags of the registration starting at `ptr`; 0 when there is none.
FAKE_EXPORT int fakecuda_registration(const void* ptr, size_t* size, unsigned* flags) {
  return memory().registration(ptr, size, flags) ? 1 : 0;
}
