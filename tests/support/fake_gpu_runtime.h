// A GPU runtime for machines without one: remembers registrations, checks they never overlap
// and are undone, and fails the call a test chooses.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "dma/gpu_runtime.h"

namespace hugepin::test {

class FakeGpuRuntime : public GpuRuntime {
 public:
  static constexpr int kErrorMemoryAllocation = 2;
  static constexpr int kErrorAlreadyRegistered = 712;
  static constexpr int kErrorNotRegistered = 713;

  // The `n`-th host_register from now (0 = the next one) fails with `code`.
  void fail_register(int n, int code) {
    std::lock_guard lock(mutex_);
    fail_at_ = registers_ + n;
    fail_code_ = code;
  }
  void fail_device_pointer(int code) { device_pointer_error_ = code; }

  int device_count(int* count) override {
    *count = 1;
    return 0;
  }
  int host_register(int, void* addr, size_t bytes) override {
    std::lock_guard lock(mutex_);
    if (registers_++ == fail_at_) return fail_code_;
    auto* first = static_cast<char*>(addr);
    for (auto& [base, size] : live_) {
      auto* other = static_cast<char*>(base);
      if (first < other + size && other < first + bytes) return kErrorAlreadyRegistered;
    }
    live_[addr] = bytes;
    ++total_registrations_;
    return 0;
  }
  int host_unregister(int, void* addr) override {
    std::lock_guard lock(mutex_);
    return live_.erase(addr) == 1 ? 0 : kErrorNotRegistered;
  }
  int device_pointer(int, void* host, void** device_ptr) override {
    if (device_pointer_error_ != 0) return device_pointer_error_;
    *device_ptr = host;
    return 0;
  }
  int pci_bus_id(int, std::string* out) override {
    *out = "0000:17:00.0";
    return 0;
  }
  std::string error_text(int code) override {
    switch (code) {
      case kErrorMemoryAllocation: return "cudaErrorMemoryAllocation: out of memory";
      case kErrorAlreadyRegistered: return "cudaErrorHostMemoryAlreadyRegistered: part or all of the requested memory range is already mapped";
      case kErrorNotRegistered: return "cudaErrorHostMemoryNotRegistered: pointer does not correspond to a registered memory region";
      default: return "cudaErrorUnknown: unknown error";
    }
  }

  size_t live_registrations() {
    std::lock_guard lock(mutex_);
    return live_.size();
  }
  std::map<void*, size_t> live() {
    std::lock_guard lock(mutex_);
    return live_;
  }

 private:
  std::mutex mutex_;
  std::map<void*, size_t> live_;
  int registers_ = 0;
  int fail_at_ = -1;
  int fail_code_ = 0;
  int device_pointer_error_ = 0;
  int total_registrations_ = 0;
};

}  // namespace hugepin::test
