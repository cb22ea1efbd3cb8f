// A stand-in for an engine's own device KV cache, for the CLI's miniature engines (`hugepin
// demo`, `hugepin bench offload`): one buffer on a GPU (or in host memory for the host backend)
// holding every segment of a rank, `blocks` blocks each, packed; and synchronous reads and writes
// of a segment's blocks to stamp and check them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "dma/device_buffer.h"
#include "session/chunk_geometry.h"

namespace hugepin::cli {

class DeviceKv {
 public:
  // Segments as `rank` has them, `blocks` each, on GPU `device` (device < 0: host memory).
  DeviceKv(const RankGeometry& rank, uint64_t blocks, int device);

  // What WorkerSession::set_device_kv takes.
  const std::vector<DeviceSegment>& segments() const { return segments_; }
  // Copies `data` into blocks first_block .. of segment `segment` (data.size() bytes), or reads
  // them into `out`; the bytes have landed when these return.
  void write(size_t segment, uint64_t first_block, std::span<const std::byte> data);
  void read(size_t segment, uint64_t first_block, std::span<std::byte> out) const;

 private:
  int device_;
  std::unique_ptr<DeviceBuffer> gpu_;
  std::unique_ptr<std::byte[]> host_;  // not zeroed: pages are touched only when used
  std::vector<DeviceSegment> segments_;
};

}  // namespace hugepin::cli
