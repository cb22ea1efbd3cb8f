// The state behind the fake CUDA libraries (fake_cudart.cc, fake_cuda_driver.cc): page-locked
// allocations and registrations, tracked the way the real driver does, so that tests of the shim
// see the answers CUDA gives. Each fake library holds its own instance.
//
//   - allocate/free: pinned allocations (anonymous memory); freeing an unknown pointer fails.
//   - register/unregister: a range overlapping an allocation or a registration is refused as
//     already registered; unregistering anything but the start of a registration fails.
//   - failure injection: `FAKE_CUDA_FAIL=name=code[@n],...` in the environment, or fail(), makes
//     every call of `name` (or only the n-th from now, counting from 1) return `code`.
//   - counters: calls of each function, live allocations and registrations.
//
// Thread-safe: one mutex around everything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "base/mutex.h"

namespace hugepin::fake {

// Result codes shared by the runtime and the driver (their values are the same).
inline constexpr int kOk = 0;
inline constexpr int kInvalidValue = 1;
inline constexpr int kOutOfMemory = 2;
inline constexpr int kAlreadyRegistered = 712;
inline constexpr int kNotRegistered = 713;
// cudaHostAllocMapped and CU_MEMHOSTALLOC_DEVICEMAP alike.
inline constexpr unsigned kMappedFlag = 2;

class HostMemory {
 public:
  // Counts a call of `function` and returns the injected failure code for it, or kOk.
  int enter(const std::string& function);
  void fail(const std::string& function, int code, int nth);
  int calls(const std::string& function);

  int allocate(void** ptr, size_t size, unsigned flags);
  int free(void* ptr);
  int register_range(void* ptr, size_t size, unsigned flags);
  int unregister(void* ptr);
  // Flags of the allocation holding `host`; kInvalidValue for any other memory, registered or not.
  int allocation_flags(void* host, unsigned* flags);
  // The device address of `host`: itself, for allocations and for registrations made with the
  // mapped flag (`mapped_flag`); kInvalidValue otherwise.
  int device_pointer(void* host, unsigned mapped_flag, void** device);

  size_t live_allocations();
  size_t live_registrations();
  // The registration starting at `ptr`: true and its size and flags, or false.
  bool registration(const void* ptr, size_t* size, unsigned* flags);

 private:
  struct Range {
    size_t size = 0;
    unsigned flags = 0;
  };
  struct Failure {
    int code = 0;
    int nth = 0;  // 0: every call; n: the n-th call from when it was set
  };

  void load_failures_from_environment() HUGEPIN_REQUIRES_LOCK(mutex_);
  static const Range* find(const std::map<uintptr_t, Range>& ranges, uintptr_t address, uintptr_t* start);
  bool overlaps(uintptr_t start, size_t size) const HUGEPIN_REQUIRES_LOCK(mutex_);

  Mutex mutex_;
  bool environment_loaded_ HUGEPIN_GUARDED_BY(mutex_) = false;
  std::map<std::string, Failure> failures_ HUGEPIN_GUARDED_BY(mutex_);
  std::map<std::string, int> calls_ HUGEPIN_GUARDED_BY(mutex_);
  std::map<uintptr_t, Range> allocations_ HUGEPIN_GUARDED_BY(mutex_);
  std::map<uintptr_t, Range> registrations_ HUGEPIN_GUARDED_BY(mutex_);
};

// Environment knobs of the fake device: FAKE_CUDA_DEVICE (default 0) and FAKE_CUDA_PCI_BUS_ID
// (default 0000:17:00.0).
int fake_device();
std::string fake_pci_bus_id();

}  // namespace hugepin::fake
