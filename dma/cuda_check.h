// CUDA runtime status to exception, for the files built against the CUDA toolkit (dma/'s CUDA
// engine and buffers, the GPU benchmarks). Code that must also build without CUDA goes through
// dma/gpu_runtime.h instead.
#pragma once

#include <cuda_runtime_api.h>

#include <string_view>

#include "base/error.h"

namespace hugepin {

// Throws Error("<what>: cudaErrorX: text", code) after clearing the runtime's last error, so
// that a failure reported here does not surface again at the next unrelated call.
inline void check_cuda(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return;
  (void)cudaGetLastError();
  throw Error(cat(what, ": ", cudaGetErrorName(error), ": ", cudaGetErrorString(error)), static_cast<int>(error));
}

}  // namespace hugepin
