#include "shim/region_allocator.h"

#include <algorithm>
#include <iterator>
#include <stdexcept>

namespace hugepin {

RegionAllocator::RegionAllocator(uint64_t size, uint64_t alignment) : size_(size), alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || size % alignment != 0) {
    throw std::invalid_argument("RegionAllocator: alignment must be a power of two dividing the size");
  }
  if (size > 0) free_.emplace(0, size);
}

std::optional<Extent> RegionAllocator::allocate(uint64_t bytes) {
  if (bytes == 0 || bytes > size_) return std::nullopt;
  const uint64_t length = (bytes + alignment_ - 1) & ~(alignment_ - 1);  // no overflow: bytes <= size_
  MutexLock lock(mutex_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < length) continue;
    Extent extent{it->first, length};
    const uint64_t rest = it->second - length;
    free_.erase(it);
    if (rest > 0) free_.emplace(extent.offset + length, rest);
    live_.emplace(extent.offset, length);
    return extent;
  }
  return std::nullopt;
}

bool RegionAllocator::release(uint64_t offset) {
  MutexLock lock(mutex_);
  auto live = live_.find(offset);
  if (live == live_.end()) return false;
  uint64_t start = offset;
  uint64_t length = live->second;
  live_.erase(live);
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + length) {
    length += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == start) {
      start = previous->first;
      length += previous->second;
      free_.erase(previous);
    }
  }
  free_.emplace(start, length);
  return true;
}

uint64_t RegionAllocator::free_bytes() const {
  MutexLock lock(mutex_);
  uint64_t total = 0;
  for (const auto& [offset, length] : free_) total += length;
  return total;
}

uint64_t RegionAllocator::largest_free() const {
  MutexLock lock(mutex_);
  uint64_t largest = 0;
  for (const auto& [offset, length] : free_) largest = std::max(largest, length);
  return largest;
}

size_t RegionAllocator::free_pieces() const {
  MutexLock lock(mutex_);
  return free_.size();
}

size_t RegionAllocator::live_extents() const {
  MutexLock lock(mutex_);
  return live_.size();
}

}  // namespace hugepin
