#include "cli/engine/kv_stamp.h"

#include <doctest/doctest.h>

#include <vector>

namespace hugepin::cli {
namespace {

TEST_CASE("stamped blocks check; a changed byte is found in its block; stamps differ by every field") {
  std::vector<std::byte> blocks(4 * 64);
  const ChunkStamp stamp{7, 3, 1, 0};
  stamp_blocks(blocks, 64, stamp);
  CHECK_FALSE(wrong_block(blocks, 64, stamp));
  blocks[2 * 64 + 5] ^= std::byte{1};
  CHECK(wrong_block(blocks, 64, stamp) == 2);
  CHECK(wrong_block(blocks, 64, ChunkStamp{7, 4, 1, 0}) == 0);
  CHECK(block_seed(stamp, 0) != block_seed({7, 3, 2, 0}, 0));
  CHECK(block_seed(stamp, 0) != block_seed({7, 3, 1, 1}, 0));
  CHECK(block_seed(stamp, 0) != block_seed(stamp, 1));
}

}  // namespace
}  // namespace hugepin::cli
