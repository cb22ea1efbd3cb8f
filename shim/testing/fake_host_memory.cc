#include "shim/testing/fake_host_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <iterator>
#include <string_view>

namespace hugepin::fake {
namespace {

constexpr size_t kPage = 4096;

size_t round_to_page(size_t size) { return (size + kPage - 1) & ~(kPage - 1); }

// True when every page of [start, start + size) is mapped in this process.
bool mapped(uintptr_t start, size_t size) {
  uintptr_t first = start & ~(kPage - 1);
  size_t length = round_to_page(start + size - first);
  return msync(reinterpret_cast<void*>(first), length, MS_ASYNC) == 0 || errno != ENOMEM;
}

}  // namespace

void HostMemory::load_failures_from_environment() {
  if (environment_loaded_) return;
  environment_loaded_ = true;
  const char* text = std::getenv("FAKE_CUDA_FAIL");
  if (text == nullptr) return;
  std::string_view rest = text;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    size_t equals = item.find('=');
    if (equals == std::string_view::npos) continue;
    std::string value(item.substr(equals + 1));
    size_t at = value.find('@');
    Failure failure;
    failure.code = std::atoi(value.substr(0, at).c_str());
    failure.nth = at == std::string::npos ? 0 : std::atoi(value.c_str() + at + 1);
    failures_[std::string(item.substr(0, equals))] = failure;
  }
}

int HostMemory::enter(const std::string& function) {
  MutexLock lock(mutex_);
  load_failures_from_environment();
  ++calls_[function];
  auto it = failures_.find(function);
  if (it == failures_.end()) return kOk;
  if (it->second.nth == 0) return it->second.code;
  if (--it->second.nth > 0) return kOk;
  int code = it->second.code;
  failures_.erase(it);
  return code;
}

void HostMemory::fail(const std::string& function, int code, int nth) {
  MutexLock lock(mutex_);
  load_failures_from_environment();
  if (code == kOk) {
    failures_.erase(function);
  } else {
    failures_[function] = Failure{code, nth};
  }
}

int HostMemory::calls(const std::string& function) {
  MutexLock lock(mutex_);
  auto it = calls_.find(function);
  return it == calls_.end() ? 0 : it->second;
}

const HostMemory::Range* HostMemory::find(const std::map<uintptr_t, Range>& ranges, uintptr_t address,
                                          uintptr_t* start) {
  auto it = ranges.upper_bound(address);
  if (it == ranges.begin()) return nullptr;
  --it;
  if (address >= it->first + it->second.size) return nullptr;
  *start = it->first;
  return &it->second;
}

bool HostMemory::overlaps(uintptr_t start, size_t size) const {
  for (const auto* ranges : {&allocations_, &registrations_}) {
    auto it = ranges->lower_bound(start + size);
    if (it == ranges->begin()) continue;
    --it;
    if (it->first + it->second.size > start) return true;
  }
  return false;
}

int HostMemory::allocate(void** ptr, size_t size, unsigned flags) {
  if (ptr == nullptr) return kInvalidValue;
  if (size == 0) {
    *ptr = nullptr;
    return kOk;
  }
  void* memory = mmap(nullptr, round_to_page(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return kOutOfMemory;
  MutexLock lock(mutex_);
  allocations_[reinterpret_cast<uintptr_t>(memory)] = Range{size, flags};
  *ptr = memory;
  return kOk;
}

int HostMemory::free(void* ptr) {
  if (ptr == nullptr) return kOk;
  size_t size = 0;
  {
    MutexLock lock(mutex_);
    auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == allocations_.end()) return kInvalidValue;
    size = it->second.size;
    allocations_.erase(it);
  }
  munmap(ptr, round_to_page(size));
  return kOk;
}

int HostMemory::register_range(void* ptr, size_t size, unsigned flags) {
  if (ptr == nullptr || size == 0) return kInvalidValue;
  auto start = reinterpret_cast<uintptr_t>(ptr);
  MutexLock lock(mutex_);
  // As the real runtime answers (CUDA 13, measured on an H200 host): a range within
  // cudaHostAlloc memory is an invalid value, one overlapping a registration already registered.
  uintptr_t ignored = 0;
  if (find(allocations_, start, &ignored) != nullptr || find(allocations_, start + size - 1, &ignored) != nullptr) {
    return kInvalidValue;
  }
  if (overlaps(start, size)) return kAlreadyRegistered;
  if (!mapped(start, size)) return kInvalidValue;
  registrations_[start] = Range{size, flags};
  return kOk;
}

int HostMemory::unregister(void* ptr) {
  MutexLock lock(mutex_);
  uintptr_t ignored = 0;
  // cudaHostAlloc memory is not a registration: the real runtime calls it an invalid value.
  if (find(allocations_, reinterpret_cast<uintptr_t>(ptr), &ignored) != nullptr) return kInvalidValue;
  return registrations_.erase(reinterpret_cast<uintptr_t>(ptr)) == 1 ? kOk : kNotRegistered;
}

int HostMemory::allocation_flags(void* host, unsigned* flags) {
  if (flags == nullptr) return kInvalidValue;
  MutexLock lock(mutex_);
  uintptr_t start = 0;
  const Range* range = find(allocations_, reinterpret_cast<uintptr_t>(host), &start);
  if (range == nullptr) return kInvalidValue;
  // Under unified addressing every cudaHostAlloc allocation is mapped: the real runtime reports
  // the Mapped bit even for flags 0 (measured on an H200 host).
  *flags = range->flags | kMappedFlag;
  return kOk;
}

int HostMemory::device_pointer(void* host, unsigned mapped_flag, void** device) {
  if (device == nullptr) return kInvalidValue;
  MutexLock lock(mutex_);
  uintptr_t start = 0;
  auto address = reinterpret_cast<uintptr_t>(host);
  const Range* registration = find(registrations_, address, &start);
  if (find(allocations_, address, &start) != nullptr ||
      (registration != nullptr && (registration->flags & mapped_flag) != 0)) {
    *device = host;
    return kOk;
  }
  return kInvalidValue;
}

size_t HostMemory::live_allocations() {
  MutexLock lock(mutex_);
  return allocations_.size();
}

size_t HostMemory::live_registrations() {
  MutexLock lock(mutex_);
  return registrations_.size();
}

bool HostMemory::registration(const void* ptr, size_t* size, unsigned* flags) {
  MutexLock lock(mutex_);
  auto it = registrations_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == registrations_.end()) return false;
  *size = it->second.size;
  *flags = it->second.flags;
  return true;
}

int fake_device() {
  const char* text = std::getenv("FAKE_CUDA_DEVICE");
  return text == nullptr ? 0 : std::atoi(text);
}

std::string fake_pci_bus_id() {
  const char* text = std::getenv("FAKE_CUDA_PCI_BUS_ID");
  return text == nullptr ? std::string("0000:17:00.0") : std::string(text);
}

}  // namespace hugepin::fake
