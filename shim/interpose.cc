// The C entry points of libhugepin_preload.so: the CUDA runtime's and driver's pinned-host calls,
// defined here so that LD_PRELOAD puts them ahead of the real ones (shim/preload.map lists them:
// the whole exported ABI).
//
// Each one decides in a few lines: a request the shim serves (shim/shim.h), or the real function
// (shim/real_symbols.h). Nothing here runs before the first call: the options are read once, then.
// No C++ exception leaves an entry point: any failure on the shim's side passes the call to CUDA.
#include <pthread.h>
#include <unistd.h>

#include <cstdint>
#include <exception>
#include <mutex>
#include <new>

#include "base/error.h"
#include "base/log.h"
#include "base/options.h"
#include "base/os.h"
#include "base/size.h"
#include "base/thread_annotations.h"
#include "shim/cuda_abi.h"
#include "shim/real_symbols.h"
#include "shim/shim.h"

namespace hugepin {
namespace {

// --- the real functions ---

RealFunction<cudaHostAlloc_t> real_cudaHostAlloc{CudaLibrary::kRuntime, "cudaHostAlloc"};
RealFunction<cudaMallocHost_t> real_cudaMallocHost{CudaLibrary::kRuntime, "cudaMallocHost"};
RealFunction<cudaFreeHost_t> real_cudaFreeHost{CudaLibrary::kRuntime, "cudaFreeHost"};
RealFunction<cudaHostRegister_t> real_cudaHostRegister{CudaLibrary::kRuntime, "cudaHostRegister"};
RealFunction<cudaHostUnregister_t> real_cudaHostUnregister{CudaLibrary::kRuntime, "cudaHostUnregister"};
RealFunction<cudaHostGetFlags_t> real_cudaHostGetFlags{CudaLibrary::kRuntime, "cudaHostGetFlags"};
RealFunction<cudaGetDevice_t> real_cudaGetDevice{CudaLibrary::kRuntime, "cudaGetDevice"};
RealFunction<cudaDeviceGetPCIBusId_t> real_cudaDeviceGetPCIBusId{CudaLibrary::kRuntime, "cudaDeviceGetPCIBusId"};
RealFunction<cudaGetLastError_t> real_cudaGetLastError{CudaLibrary::kRuntime, "cudaGetLastError"};
RealFunction<cudaPeekAtLastError_t> real_cudaPeekAtLastError{CudaLibrary::kRuntime, "cudaPeekAtLastError"};
RealFunction<cudaGetErrorString_t> real_cudaGetErrorString{CudaLibrary::kRuntime, "cudaGetErrorString"};

RealFunction<cuMemHostAlloc_t> real_cuMemHostAlloc{CudaLibrary::kDriver, "cuMemHostAlloc"};
RealFunction<cuMemAllocHost_v2_t> real_cuMemAllocHost_v2{CudaLibrary::kDriver, "cuMemAllocHost_v2"};
RealFunction<cuMemFreeHost_t> real_cuMemFreeHost{CudaLibrary::kDriver, "cuMemFreeHost"};
RealFunction<cuMemHostRegister_v2_t> real_cuMemHostRegister_v2{CudaLibrary::kDriver, "cuMemHostRegister_v2"};
RealFunction<cuMemHostUnregister_t> real_cuMemHostUnregister{CudaLibrary::kDriver, "cuMemHostUnregister"};
RealFunction<cuMemHostGetFlags_t> real_cuMemHostGetFlags{CudaLibrary::kDriver, "cuMemHostGetFlags"};
RealFunction<cuCtxGetDevice_t> real_cuCtxGetDevice{CudaLibrary::kDriver, "cuCtxGetDevice"};
RealFunction<cuDeviceGetPCIBusId_t> real_cuDeviceGetPCIBusId{CudaLibrary::kDriver, "cuDeviceGetPCIBusId"};

// Calls a real function, or returns `missing` when it cannot be found (the library is not loaded:
// then the application could not have reached the function either).
template <typename Function, typename... Args>
int call_real(RealFunction<Function>& function, int missing, Args... args) {
  Function real = function.get();
  return real != nullptr ? real(args...) : missing;
}

// Addresses CUDA never handed out nor registered: asking the real library to free or unregister
// them returns exactly its answer for an invalid pointer (and sets the runtime's last error as
// that answer does).
unsigned char g_never_allocated;
unsigned char g_never_registered;

// --- the two APIs, as the shim registers through them ---

class RuntimePinApi final : public PinApi {
 public:
  shim_table::Api kind() const override { return shim_table::Api::kRuntime; }
  int register_memory(void* address, uint64_t bytes) override {
    return call_real(real_cudaHostRegister, cuda::kErrorInitializationError, address, static_cast<size_t>(bytes),
                     cuda::kHostRegisterPortable | cuda::kHostRegisterMapped);
  }
  int unregister_memory(void* address) override {
    return call_real(real_cudaHostUnregister, cuda::kErrorInitializationError, address);
  }
  int current_gpu(std::string* pci_address) override {
    int device = 0;
    if (int rc = call_real(real_cudaGetDevice, cuda::kErrorInitializationError, &device)) return rc;
    char id[32] = {};
    if (int rc = call_real(real_cudaDeviceGetPCIBusId, cuda::kErrorInitializationError, id, int{sizeof id}, device)) {
      return rc;
    }
    *pci_address = id;
    return 0;
  }
  std::string describe(const char* call, int code) override {
    cudaGetErrorString_t text = real_cudaGetErrorString.get();
    return cat(call, " failed: CUDA runtime error ", code, text != nullptr ? cat(" (", text(code), ")") : "");
  }
  void clear_error() override { call_real(real_cudaGetLastError, 0); }
  int not_registered_code() const override { return cuda::kErrorHostMemoryNotRegistered; }
};

class DriverPinApi final : public PinApi {
 public:
  shim_table::Api kind() const override { return shim_table::Api::kDriver; }
  int register_memory(void* address, uint64_t bytes) override {
    return call_real(real_cuMemHostRegister_v2, cuda::kDriverErrorNotInitialized, address, static_cast<size_t>(bytes),
                     cuda::kMemHostRegisterPortable | cuda::kMemHostRegisterDeviceMap);
  }
  int unregister_memory(void* address) override {
    return call_real(real_cuMemHostUnregister, cuda::kDriverErrorNotInitialized, address);
  }
  int current_gpu(std::string* pci_address) override {
    int device = 0;
    if (int rc = call_real(real_cuCtxGetDevice, cuda::kDriverErrorNotInitialized, &device)) return rc;
    char id[32] = {};
    if (int rc = call_real(real_cuDeviceGetPCIBusId, cuda::kDriverErrorNotInitialized, id, int{sizeof id}, device)) {
      return rc;
    }
    *pci_address = id;
    return 0;
  }
  std::string describe(const char* call, int code) override { return cat(call, " failed: CUDA driver error ", code); }
  void clear_error() override {}  // the driver keeps no last error
  int not_registered_code() const override { return cuda::kDriverErrorHostMemoryNotRegistered; }
};

// Holds a T that is never destroyed (leveldb's NoDestructor): an application may free pinned
// memory from its own exit handlers, after this library's destructors ran. Constructing one
// allocates nothing, so the entry points cannot throw getting at it.
template <typename T>
class NoDestructor {
 public:
  NoDestructor() { new (storage_) T(); }
  T& get() { return *std::launder(reinterpret_cast<T*>(storage_)); }

 private:
  alignas(T) unsigned char storage_[sizeof(T)];
};

PinApi& runtime_api() {
  static NoDestructor<RuntimePinApi> api;
  return api.get();
}
PinApi& driver_api() {
  static NoDestructor<DriverPinApi> api;
  return api.get();
}

// --- the shim, set up at the first call ---

Shim* g_shim = nullptr;

// One hold of the shim's mutex over three callbacks (Shim::before_fork and the two after_fork
// methods carry the annotations); the analysis sees one function at a time.
void before_fork() HUGEPIN_NO_THREAD_ANALYSIS { g_shim->before_fork(); }
void after_fork_in_parent() HUGEPIN_NO_THREAD_ANALYSIS { g_shim->after_fork_in_parent(); }
void after_fork_in_child() HUGEPIN_NO_THREAD_ANALYSIS { g_shim->after_fork_in_child(); }

void start_shim() {
  std::vector<std::string> problems;
  const OptionSource source = environment_source();
  Options options = Options::parse(source, &problems, kShimScope);  // hugepind's options are not the shim's
  ShimConfig config = make_shim_config(options, source, &problems);
  log::set_program(cat("hugepin-shim[", getpid(), "]"));
  log::set_level(config.log_level);
  for (const std::string& problem : problems) log::warn_once(problem, problem);
  if (config.disabled) {
    log::info("HUGEPIN_DISABLE is set: every call goes to CUDA unchanged");
    return;
  }
  // A rooted Os lives as long as the shim: for the whole process.
  Os& os = config.sysroot == "/" || config.sysroot.empty() ? real_os() : *make_rooted_os(config.sysroot).release();
  log::info(cat("serving pinned requests of ", format_bytes(config.min_bytes), " and more from ",
                config.arena.empty() ? std::string("private hugepage mappings")
                                     : cat("arena '", config.arena, "' rank ", config.rank, " (", config.rank_source, ")")));
  g_shim = new Shim(os, std::move(config));
  pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
}

// The shim, or null when it is disabled or could not start: then every call goes to CUDA.
Shim* shim() {
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      start_shim();
    } catch (const std::exception& error) {
      log::warn(cat("the shim could not start, every call goes to CUDA: ", error.what()));
      g_shim = nullptr;
    }
  });
  return g_shim;
}

// True when the shim should try to serve `bytes` asked with `flags` (cudaHostAlloc's flag bits,
// which cuMemHostAlloc shares).
bool wants(Shim* shim, void** ptr, size_t bytes, unsigned flags, const char* entry) {
  if (shim == nullptr || ptr == nullptr || bytes == 0 || bytes < shim->config().min_bytes) return false;
  if ((flags & ~cuda::kHostAllocKnownFlags) != 0) return false;  // CUDA refuses them
  if ((flags & cuda::kHostAllocWriteCombined) != 0) {
    log::warn_once("write-combined", cat(entry, "(", format_bytes(bytes), ") with the write-combined flag goes to CUDA: "
                                         "registered memory cannot be made write-combined"));
    return false;
  }
  return true;
}

// True when the calling thread has a runtime error pending that the application has not read.
// The shim then stands aside: clearing its own failures would clear that error too.
bool runtime_error_pending(const char* entry) {
  int pending = call_real(real_cudaPeekAtLastError, 0);
  if (pending == 0) return false;
  log::warn_once("pending-error", cat(entry, " goes to CUDA while the thread has CUDA error ", pending,
                                      " pending (cudaGetLastError has not read it)"));
  return true;
}

// The serving path of every allocating entry point; `real` makes the real call.
template <typename RealCall>
int allocate(const char* entry, void** ptr, size_t bytes, unsigned flags, PinApi& api, bool runtime, RealCall real) {
  Shim* active = nullptr;
  try {
    active = shim();
    if (wants(active, ptr, bytes, flags, entry) && !(runtime && runtime_error_pending(entry))) {
      if (void* memory = active->serve(entry, bytes, flags, api)) {
        *ptr = memory;
        return 0;
      }
    }
  } catch (...) {
    // Fall through to CUDA.
  }
  int rc = real();
  try {
    if (rc == 0 && active != nullptr && ptr != nullptr && *ptr != nullptr) active->note_cuda_allocation(*ptr);
  } catch (...) {
  }
  return rc;
}

// The freeing path: a shim allocation is released here; anything else goes to the real
// function, a second free of a shim allocation too (with a warning): CUDA answers an address it
// does not know as an invalid pointer, and one it has since handed out again (its own allocation
// at a reused address) is CUDA's to free.
template <typename RealFree>
int free_host(const char* entry, void* ptr, RealFree real_free) {
  try {
    if (Shim* active = shim()) {
      Shim::ReleaseResult result = active->release(ptr);
      if (result.freed == Shim::Freed::kReleased) return result.code;
      if (result.freed == Shim::Freed::kFreedBefore) {
        log::warn_once("double-free", cat(entry, "(", ptr, "): the shim freed an allocation here already (a double "
                                          "free, or CUDA memory at a reused address): passed to CUDA"));
      }
    }
  } catch (...) {
  }
  return real_free(ptr);
}

// True when `ptr` lies in a live shim allocation.
bool shim_holds(const void* ptr) {
  try {
    Shim* active = shim();
    return active != nullptr && active->holds(ptr);
  } catch (...) {
    return false;
  }
}

std::optional<uint32_t> shim_flags(const void* ptr) {
  try {
    Shim* active = shim();
    return active != nullptr ? active->flags_of(ptr) : std::nullopt;
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace
}  // namespace hugepin

// --- the exported entry points (shim/preload.map) ---

#define HUGEPIN_EXPORT extern "C" __attribute__((visibility("default")))

using namespace hugepin;

HUGEPIN_EXPORT int cudaHostAlloc(void** ptr, size_t size, unsigned int flags) {
  return allocate("cudaHostAlloc", ptr, size, flags, runtime_api(), true, [&] {
    return call_real(real_cudaHostAlloc, cuda::kErrorInitializationError, ptr, size, flags);
  });
}

HUGEPIN_EXPORT int cudaMallocHost(void** ptr, size_t size) {
  return allocate("cudaMallocHost", ptr, size, 0, runtime_api(), true, [&] {
    return call_real(real_cudaMallocHost, cuda::kErrorInitializationError, ptr, size);
  });
}

HUGEPIN_EXPORT int cudaFreeHost(void* ptr) {
  return free_host("cudaFreeHost", ptr, [](void* p) {
    return call_real(real_cudaFreeHost, cuda::kErrorInvalidValue, p);
  });
}

// What the real runtime answers for cudaHostAlloc memory, measured on the H200 host (CUDA 13,
// driver 580): registering any part of it, or unregistering it, is cudaErrorInvalidValue, and
// cudaHostGetFlags reports the Mapped bit even when flags 0 were asked (unified addressing).
// Shim memory is registered memory underneath, so the shim answers these calls itself, setting
// the runtime's last error the way the runtime would (the real cudaFreeHost of an address it never
// handed out returns, and records, cudaErrorInvalidValue).
int runtime_invalid_value() {
  return call_real(real_cudaFreeHost, cuda::kErrorInvalidValue, static_cast<void*>(&g_never_allocated));
}

HUGEPIN_EXPORT int cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  const char* first = static_cast<const char*>(ptr);
  if (size > 0 && (shim_holds(first) || shim_holds(first + size - 1))) return runtime_invalid_value();
  return call_real(real_cudaHostRegister, cuda::kErrorInitializationError, ptr, size, flags);
}

HUGEPIN_EXPORT int cudaHostUnregister(void* ptr) {
  // Unregistering a shim allocation must not undo the shim's registration.
  if (shim_holds(ptr)) return runtime_invalid_value();
  return call_real(real_cudaHostUnregister, cuda::kErrorInitializationError, ptr);
}

HUGEPIN_EXPORT int cudaHostGetFlags(unsigned int* flags, void* host) {
  if (std::optional<uint32_t> asked = shim_flags(host)) {
    if (flags == nullptr) return cuda::kErrorInvalidValue;
    *flags = *asked | cuda::kHostAllocMapped;
    return cuda::kSuccess;
  }
  return call_real(real_cudaHostGetFlags, cuda::kErrorInitializationError, flags, host);
}

HUGEPIN_EXPORT int cuMemHostAlloc(void** ptr, size_t size, unsigned int flags) {
  return allocate("cuMemHostAlloc", ptr, size, flags, driver_api(), false, [&] {
    return call_real(real_cuMemHostAlloc, cuda::kDriverErrorNotInitialized, ptr, size, flags);
  });
}

HUGEPIN_EXPORT int cuMemAllocHost_v2(void** ptr, size_t size) {
  return allocate("cuMemAllocHost", ptr, size, 0, driver_api(), false, [&] {
    return call_real(real_cuMemAllocHost_v2, cuda::kDriverErrorNotInitialized, ptr, size);
  });
}

HUGEPIN_EXPORT int cuMemFreeHost(void* ptr) {
  return free_host("cuMemFreeHost", ptr, [](void* p) {
    return call_real(real_cuMemFreeHost, cuda::kDriverErrorInvalidValue, p);
  });
}

HUGEPIN_EXPORT int cuMemHostUnregister(void* ptr) {
  if (shim_holds(ptr)) {
    return call_real(real_cuMemHostUnregister, cuda::kDriverErrorHostMemoryNotRegistered,
                     static_cast<void*>(&g_never_registered));
  }
  return call_real(real_cuMemHostUnregister, cuda::kDriverErrorNotInitialized, ptr);
}

HUGEPIN_EXPORT int cuMemHostGetFlags(unsigned int* flags, void* host) {
  if (std::optional<uint32_t> asked = shim_flags(host)) {
    if (flags == nullptr) return cuda::kDriverErrorInvalidValue;
    *flags = *asked;
    return cuda::kDriverSuccess;
  }
  return call_real(real_cuMemHostGetFlags, cuda::kDriverErrorNotInitialized, flags, host);
}
