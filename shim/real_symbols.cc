#include "shim/real_symbols.h"

#include <dlfcn.h>
#include <link.h>

#include <array>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace hugepin {
namespace {

// True when `address` lies in the shim itself: never take our own definition for the real one.
bool in_this_object(void* address) {
  Dl_info mine{};
  Dl_info found{};
  if (dladdr(reinterpret_cast<void*>(&in_this_object), &mine) == 0) return false;
  return dladdr(address, &found) != 0 && found.dli_fbase == mine.dli_fbase;
}

// dlsym in a library that is loaded already; the handle is kept open on success.
void* symbol_in_loaded(const char* file, const char* name) {
  void* handle = dlopen(file, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr || in_this_object(symbol)) {
    dlclose(handle);
    return nullptr;
  }
  return symbol;  // the handle stays open: the function must outlive a dlclose by the application
}

// The paths of every loaded object that has one, in load order. Only collected here: dlopen
// must not run under dl_iterate_phdr's lock.
int collect_object(dl_phdr_info* info, size_t, void* data) {
  auto* paths = static_cast<std::vector<std::string>*>(data);
  if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') paths->emplace_back(info->dlpi_name);
  return 0;
}

bool base_name_starts_with(const std::string& path, const char* prefix) {
  const size_t slash = path.rfind('/');
  const char* base = path.c_str() + (slash == std::string::npos ? 0 : slash + 1);
  return std::strncmp(base, prefix, std::strlen(prefix)) == 0;
}

}  // namespace

void* find_real_symbol(CudaLibrary library, const char* name) {
  void* symbol = dlsym(RTLD_NEXT, name);
  if (symbol != nullptr && !in_this_object(symbol)) return symbol;
  static constexpr std::array<const char*, 3> kRuntimeFiles{"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
  static constexpr std::array<const char*, 2> kDriverFiles{"libcuda.so.1", "libcuda.so"};
  const bool runtime = library == CudaLibrary::kRuntime;
  std::span<const char* const> files = runtime ? std::span<const char* const>(kRuntimeFiles)
                                               : std::span<const char* const>(kDriverFiles);
  for (const char* file : files) {
    if ((symbol = symbol_in_loaded(file, name)) != nullptr) return symbol;
  }
  // Loaded under another file name (RTLD_LOCAL, so RTLD_NEXT does not see it): wheels repaired
  // by auditwheel ship libcudart-<hash>.so.N. First the objects named like the library, then any
  // loaded object that defines the symbol (a static cudart inside another library).
  std::vector<std::string> paths;
  dl_iterate_phdr(collect_object, &paths);
  const char* prefix = runtime ? "libcudart" : "libcuda";
  for (const std::string& path : paths) {
    if (!base_name_starts_with(path, prefix)) continue;
    if ((symbol = symbol_in_loaded(path.c_str(), name)) != nullptr) return symbol;
  }
  for (const std::string& path : paths) {
    if ((symbol = symbol_in_loaded(path.c_str(), name)) != nullptr) return symbol;
  }
  return nullptr;
}

}  // namespace hugepin
