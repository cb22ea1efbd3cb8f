// Small CUDA helpers for the GPU benchmarks: timed contiguous copies (device buffers: dma/device_buffer.h).
// Built only with CUDA.
#pragma once

#include <cstdint>

#include "dma/device_buffer.h"

namespace hugepin::bench {

// Seconds for one cudaMemcpyAsync of `bytes` between `device` and `host` (pinned), on a fresh
// stream, measured with events.
double contiguous_copy(void* device, void* host, uint64_t bytes, bool host_to_device);
// Seconds for both directions at once, each on its own stream, over halves of nothing shared:
// device[0, bytes) <- host[0, bytes) while host[bytes, 2 bytes) <- device[bytes, 2 bytes).
double contiguous_both(void* device, void* host, uint64_t bytes);

}  // namespace hugepin::bench
