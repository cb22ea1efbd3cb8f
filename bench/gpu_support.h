// Small CUDA helpers for the GPU benchmarks: timed contiguous copies (device buffers: dma/device_buffer.h).
// Built only with CUDA.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "dma/device_buffer.h"
#include "hugemem/region.h"

namespace hugepin::bench {

// Seconds for one cudaMemcpyAsync of `bytes` between `device` and `host` (pinned), on a fresh
// stream, measured with events.
double contiguous_copy(void* device, void* host, uint64_t bytes, bool host_to_device);
// Seconds for both directions at once, each on its own stream, over halves of nothing shared:
// device[0, bytes) <- host[0, bytes) while host[bytes, 2 bytes) <- device[bytes, 2 bytes).
double contiguous_both(void* device, void* host, uint64_t bytes);

// A host region of `bytes` for a benchmark's copies: an arena of one region named after `tag`
// and this process, mapped, then destroyed by name at once (the mapping keeps the pages until
// it goes, and nothing is left behind if the benchmark dies).
MappedRegion scratch_region(std::string_view tag, uint64_t bytes, uint64_t page_size, const std::string& hugetlbfs_dir);

}  // namespace hugepin::bench
