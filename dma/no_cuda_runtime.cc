// Builds without CUDA: there is no GPU runtime and no CUDA copy engine.
#include "base/error.h"
#include "dma/copy_engine.h"
#include "dma/device_buffer.h"
#include "dma/gpu_runtime.h"

namespace hugepin {

GpuRuntime* cuda_runtime() { return nullptr; }

bool cuda_available() { return false; }

std::unique_ptr<CopyEngine> make_cuda_copy_engine(std::vector<SegmentView>, const CopyEngineOptions&) {
  throw Error("this build of hugepin has no CUDA support (configure with nvcc available)");
}

namespace {
[[noreturn]] void no_cuda() { throw Error("this build of hugepin has no CUDA support (configure with nvcc available)"); }
}  // namespace

DeviceBuffer::DeviceBuffer(int, uint64_t) { no_cuda(); }
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(DeviceBuffer&&) noexcept {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&&) noexcept { return *this; }
void DeviceBuffer::fill(int) { no_cuda(); }
void copy_to_device(int, uint64_t, const void*, size_t) { no_cuda(); }
void copy_from_device(int, void*, uint64_t, size_t) { no_cuda(); }

}  // namespace hugepin
