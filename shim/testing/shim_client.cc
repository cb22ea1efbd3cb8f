// A library that uses the CUDA runtime (linked against the fake libcudart.so.13, so its references
// are cudaHostAlloc@libcudart.so.13), loaded with dlopen by shim_dlopen_probe after the process
// started: the way PyTorch's extension modules bring libcudart into a Python process.
#include <cstddef>
#include <cstdint>
#include <cstring>

extern "C" {
int cudaHostAlloc(void** ptr, size_t size, unsigned int flags);
int cudaFreeHost(void* ptr);
int cudaGetLastError();
int fakecuda_calls(const char* function);
int fakecuda_live_registrations();

// Allocates `bytes`, writes and reads every byte, frees. Returns 0 when the shim served it (the
// runtime never saw the cudaHostAlloc, one registration was made), else a code saying what went
// wrong.
__attribute__((visibility("default"))) int client_check(size_t bytes) {
  void* memory = nullptr;
  if (cudaHostAlloc(&memory, bytes, 0) != 0) return 1;
  if (fakecuda_calls("cudaHostAlloc") != 0) return 2;  // the runtime served it: the shim was passed over
  if (fakecuda_live_registrations() != 1) return 3;
  std::memset(memory, 0x5a, bytes);
  for (size_t i = 0; i < bytes; i += 4096) {
    if (static_cast<unsigned char*>(memory)[i] != 0x5a) return 4;
  }
  if (cudaFreeHost(memory) != 0) return 5;
  if (fakecuda_live_registrations() != 0) return 6;
  return cudaGetLastError() == 0 ? 0 : 7;
}
}
