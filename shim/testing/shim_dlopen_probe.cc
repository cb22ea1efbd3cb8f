// A program with no CUDA at start that loads it later with dlopen, run under the shim: the shim
// must find the real runtime then (RTLD_NEXT cannot see a library dlopen'ed with RTLD_LOCAL).
//
//   shim_dlopen_probe client CLIENT_SO     dlopen a library that uses libcudart (RTLD_LOCAL),
//                                          call it through dlsym: its allocation goes to the shim
//   shim_dlopen_probe global CUDART_SO     dlopen libcudart with RTLD_GLOBAL, call
//                                          dlsym(RTLD_DEFAULT, "cudaHostAlloc"): the shim's
//   shim_dlopen_probe handle CUDART_SO     dlsym(handle, "cudaHostAlloc") bypasses the shim (as it
//                                          bypasses any LD_PRELOAD interposer); freeing that memory
//                                          through the shim's cudaFreeHost still works
//
// Exits 0 when every check held; prints one line per failed check.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

using HostAlloc = int (*)(void**, size_t, unsigned);
using FreeHost = int (*)(void*);
using Calls = int (*)(const char*);

int g_failures = 0;

void check(bool condition, const char* what) {
  if (condition) return;
  ++g_failures;
  std::printf("FAIL: %s\n", what);
}

constexpr size_t kBytes = 3 << 20;

int client(const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::printf("FAIL: dlopen %s: %s\n", path, dlerror());
    return 1;
  }
  auto client_check = reinterpret_cast<int (*)(size_t)>(dlsym(handle, "client_check"));
  check(client_check != nullptr, "client_check not found");
  if (client_check != nullptr) {
    int rc = client_check(kBytes);
    if (rc != 0) std::printf("FAIL: client_check returned %d\n", rc);
    g_failures += rc != 0;
  }
  return 0;
}

int global(const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  check(handle != nullptr, "dlopen of the runtime failed");
  if (handle == nullptr) return 1;
  auto host_alloc = reinterpret_cast<HostAlloc>(dlsym(RTLD_DEFAULT, "cudaHostAlloc"));
  auto free_host = reinterpret_cast<FreeHost>(dlsym(RTLD_DEFAULT, "cudaFreeHost"));
  auto calls = reinterpret_cast<Calls>(dlsym(handle, "fakecuda_calls"));
  check(host_alloc != nullptr && free_host != nullptr && calls != nullptr, "symbols not found");
  if (g_failures != 0) return 1;
  void* memory = nullptr;
  check(host_alloc(&memory, kBytes, 0) == 0, "cudaHostAlloc failed");
  check(calls("cudaHostAlloc") == 0, "the runtime served a request the shim should have");
  check(calls("cudaHostRegister") == 1, "the shim did not register through the runtime");
  if (memory != nullptr) std::memset(memory, 1, kBytes);
  check(free_host(memory) == 0, "cudaFreeHost failed");
  check(calls("cudaHostUnregister") == 1, "the shim did not unregister through the runtime");
  return 0;
}

int handle(const char* path) {
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  check(library != nullptr, "dlopen of the runtime failed");
  if (library == nullptr) return 1;
  auto direct = reinterpret_cast<HostAlloc>(dlsym(library, "cudaHostAlloc"));
  auto free_host = reinterpret_cast<FreeHost>(dlsym(RTLD_DEFAULT, "cudaFreeHost"));
  auto calls = reinterpret_cast<Calls>(dlsym(library, "fakecuda_calls"));
  check(direct != nullptr && free_host != nullptr && calls != nullptr, "symbols not found");
  if (g_failures != 0) return 1;
  void* memory = nullptr;
  check(direct(&memory, kBytes, 0) == 0 && calls("cudaHostAlloc") == 1, "the runtime's own cudaHostAlloc");
  check(free_host(memory) == 0 && calls("cudaFreeHost") == 1, "the shim did not pass a foreign free to the runtime");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::printf("usage: shim_dlopen_probe client|global|handle PATH\n");
    return 2;
  }
  std::string mode = argv[1];
  int rc = mode == "client" ? client(argv[2]) : mode == "global" ? global(argv[2]) : mode == "handle" ? handle(argv[2]) : 2;
  if (rc != 0) return rc;
  if (g_failures == 0) std::printf("ok: %s\n", mode.c_str());
  return g_failures == 0 ? 0 : 1;
}
