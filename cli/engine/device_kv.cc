#include "cli/engine/device_kv.h"

#include <algorithm>

namespace hugepin::cli {

DeviceKv::DeviceKv(const RankGeometry& rank, uint64_t blocks, int device) : device_(device) {
  uint64_t bytes = 0;
  for (const SegmentGeometry& segment : rank.segments) bytes += blocks * segment.bytes_per_block;
  if (device >= 0) {
    gpu_ = std::make_unique<DeviceBuffer>(device, bytes);
  } else {
    host_.reset(new std::byte[bytes]);
  }
  uint64_t address = gpu_ ? gpu_->address() : reinterpret_cast<uintptr_t>(host_.get());
  for (const SegmentGeometry& segment : rank.segments) {
    segments_.push_back({address, segment.bytes_per_block, blocks, segment.bytes_per_block});
    address += blocks * segment.bytes_per_block;
  }
}

void DeviceKv::write(size_t segment, uint64_t first_block, std::span<const std::byte> data) {
  const uint64_t address = segments_.at(segment).device_base + first_block * segments_[segment].block_stride;
  if (gpu_) {
    copy_to_device(device_, address, data.data(), data.size());
  } else {
    std::copy(data.begin(), data.end(), reinterpret_cast<std::byte*>(address));
  }
}

void DeviceKv::read(size_t segment, uint64_t first_block, std::span<std::byte> out) const {
  const uint64_t address = segments_.at(segment).device_base + first_block * segments_[segment].block_stride;
  if (gpu_) {
    copy_from_device(device_, out.data(), address, out.size());
  } else {
    std::copy_n(reinterpret_cast<const std::byte*>(address), out.size(), out.data());
  }
}

}  // namespace hugepin::cli
