// Stamped KV blocks for the CLI's miniature engines: every block of a chunk gets bytes that are a
// function of (chunk, version, rank, segment, block), so any process can check any copy of it
// (base/pattern.h fills and checks the bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace hugepin::cli {

// Whose bytes a run of blocks should hold: block b of the run is block b of the chunk.
struct ChunkStamp {
  uint64_t chunk = 0;
  uint64_t version = 0;  // of the store that wrote it
  uint32_t rank = 0;
  uint64_t segment = 0;
};

// The seed of block `block` of `stamp`'s chunk.
uint64_t block_seed(const ChunkStamp& stamp, uint64_t block);
// Fills `blocks` (a whole number of blocks of `bytes_per_block`) with their stamps.
void stamp_blocks(std::span<std::byte> blocks, uint64_t bytes_per_block, const ChunkStamp& stamp);
// The first block of `blocks` that does not hold its stamp; nullopt when all do.
std::optional<uint64_t> wrong_block(std::span<const std::byte> blocks, uint64_t bytes_per_block, const ChunkStamp& stamp);

}  // namespace hugepin::cli
