// Finding the real CUDA functions behind the ones the shim interposes.
//
// The shim's definitions come first in the process (LD_PRELOAD), so the real ones are looked up
// by hand, once each, at their first use (never in a constructor):
//   1. dlsym(RTLD_NEXT): the runtime or driver was loaded at start (a NEEDED dependency).
//   2. dlopen(RTLD_NOLOAD) of the usual names (libcudart.so.13, libcudart.so.12, libcudart.so;
//      libcuda.so.1, libcuda.so): it was dlopen'ed later, as PyTorch's extension modules load it,
//      out of RTLD_NEXT's reach.
//   3. any loaded object whose file name starts with libcudart.so (libcuda.so), found with
//      dl_iterate_phdr and opened with RTLD_NOLOAD.
// A library found by 2 or 3 is held open, so the functions stay valid. Nothing is ever loaded
// that the process had not loaded: the shim never brings CUDA into a process.
//
// Thread-safety: RealFunction::get may be called from any thread.
#pragma once

#include <atomic>

namespace hugepin {

enum class CudaLibrary { kRuntime, kDriver };

// The real definition of `name`, or null when the library is not loaded (or lacks it).
void* find_real_symbol(CudaLibrary library, const char* name);

// One real function, resolved at its first use and then kept. Constant-initialized.
template <typename Function>
class RealFunction {
 public:
  constexpr RealFunction(CudaLibrary library, const char* name) : library_(library), name_(name) {}

  // The function, or null when it cannot be found (tried again next time).
  Function get() {
    void* function = cached_.load(std::memory_order_acquire);
    if (function == nullptr) {
      function = find_real_symbol(library_, name_);
      if (function != nullptr) cached_.store(function, std::memory_order_release);
    }
    return reinterpret_cast<Function>(function);
  }

 private:
  const CudaLibrary library_;
  const char* const name_;
  std::atomic<void*> cached_{nullptr};
};

}  // namespace hugepin
