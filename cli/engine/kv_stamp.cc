#include "cli/engine/kv_stamp.h"

#include "base/pattern.h"

namespace hugepin::cli {

uint64_t block_seed(const ChunkStamp& stamp, uint64_t block) {
  return mix64(mix64(mix64(mix64(stamp.chunk) ^ stamp.version) ^ stamp.rank) ^ (stamp.segment << 32 | block));
}

void stamp_blocks(std::span<std::byte> blocks, uint64_t bytes_per_block, const ChunkStamp& stamp) {
  for (uint64_t b = 0; b * bytes_per_block < blocks.size(); ++b) {
    fill_pattern(blocks.data() + b * bytes_per_block, bytes_per_block, block_seed(stamp, b));
  }
}

std::optional<uint64_t> wrong_block(std::span<const std::byte> blocks, uint64_t bytes_per_block, const ChunkStamp& stamp) {
  for (uint64_t b = 0; b * bytes_per_block < blocks.size(); ++b) {
    if (find_pattern_mismatch(blocks.data() + b * bytes_per_block, bytes_per_block, block_seed(stamp, b))) return b;
  }
  return std::nullopt;
}

}  // namespace hugepin::cli
