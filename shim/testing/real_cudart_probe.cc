// Calls the pinned-host entry points of the real CUDA runtime (linked against the installed
// libcudart.so.13, through the shim's own declarations) and prints what each returns and what
// cudaGetLastError says after it, one line per call. shim_real_cudart_test runs it with and
// without the shim: the lines must be the same.
#include <cstdio>

#include "shim/cuda_abi.h"

extern "C" {
int cudaHostAlloc(void** ptr, size_t size, unsigned int flags);
int cudaMallocHost(void** ptr, size_t size);
int cudaFreeHost(void* ptr);
int cudaHostUnregister(void* ptr);
int cudaHostGetFlags(unsigned int* flags, void* host);
int cudaGetLastError();
}

namespace {

void show(const char* call, int code) { std::printf("%s -> %d, last error %d\n", call, code, cudaGetLastError()); }

}  // namespace

int main() {
  void* large = nullptr;
  void* small = nullptr;
  void* plain = nullptr;
  int local = 0;
  unsigned flags = 0;
  show("cudaHostAlloc(96 MiB + 1)", cudaHostAlloc(&large, (96u << 20) + 1, hugepin::cuda::kHostAllocPortable));
  show("cudaMallocHost(80 MiB)", cudaMallocHost(&plain, 80u << 20));
  show("cudaHostAlloc(4 KiB)", cudaHostAlloc(&small, 4096, 0));
  show("cudaHostGetFlags(large)", large != nullptr ? cudaHostGetFlags(&flags, large) : -1);
  show("cudaHostUnregister(local)", cudaHostUnregister(&local));
  show("cudaFreeHost(large)", large != nullptr ? cudaFreeHost(large) : -1);
  show("cudaFreeHost(large) again", large != nullptr ? cudaFreeHost(large) : -1);
  show("cudaFreeHost(plain)", plain != nullptr ? cudaFreeHost(plain) : -1);
  show("cudaFreeHost(small)", small != nullptr ? cudaFreeHost(small) : -1);
  show("cudaFreeHost(local)", cudaFreeHost(&local));
  show("cudaFreeHost(NULL)", cudaFreeHost(nullptr));
  return 0;
}
