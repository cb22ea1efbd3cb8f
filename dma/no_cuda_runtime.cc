// Builds without CUDA: there is no GPU runtime and no CUDA copy engine.
#include "base/error.h"
#include "dma/copy_engine.h"
#include "dma/gpu_runtime.h"

namespace hugepin {

GpuRuntime* cuda_runtime() { return nullptr; }

bool cuda_available() { return false; }

std::unique_ptr<CopyEngine> make_cuda_copy_engine(std::vector<SegmentView>, const CopyEngineOptions&) {
  throw Error("this build of hugepin has no CUDA support (configure with nvcc available)");
}

}  // namespace hugepin
