#include "shim/real_symbols.h"

#include <dlfcn.h>
#include <link.h>

#include <array>
#include <cstring>
#include <span>
#include <string>

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

struct PhdrSearch {
  const char* prefix;
  std::string path;  // the first loaded object whose file name starts with `prefix`
};

// Only remembers the path: dlopen must not run under dl_iterate_phdr's lock.
int search_object(dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<PhdrSearch*>(data);
  if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') return 0;
  const char* slash = std::strrchr(info->dlpi_name, '/');
  const char* base = slash != nullptr ? slash + 1 : info->dlpi_name;
  if (std::strncmp(base, search->prefix, std::strlen(search->prefix)) != 0) return 0;
  search->path = info->dlpi_name;
  return 1;
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
  PhdrSearch search{runtime ? "libcudart.so" : "libcuda.so", {}};
  dl_iterate_phdr(search_object, &search);
  return search.path.empty() ? nullptr : symbol_in_loaded(search.path.c_str(), name);
}

}  // namespace hugepin
