#include <doctest/doctest.h>

#include "base/error.h"
#include "base/size.h"
#include "ipc/arena_layout.h"

namespace hugepin {

TEST_CASE("layout_for_size: tp = ranks, one block per chunk, what the smallest region holds") {
  ArenaLayout layout = layout_for_size(10 * kMiB + 3, 3, 2 * kMiB, 1);
  CHECK(layout.tp == 3);
  CHECK(layout.pp == 1);
  CHECK(layout.blocks_per_chunk == 1);
  CHECK(layout.chunk_count == 1);  // (10 MiB + 3) / 3 = 3.33 MiB per rank: one 2 MiB chunk
  REQUIRE(layout.ranks.size() == 3);
  CHECK(layout.ranks[0].region_bytes == (10 * kMiB + 3) / 3 + 1);  // the remainder goes to the first ranks
  CHECK(layout.ranks[2].region_bytes == (10 * kMiB + 3) / 3);
  CHECK(layout.ranks[1].tp_rank == 1);
  CHECK(layout.ranks[1].payload_bytes_per_block == 2 * kMiB);
  CHECK(layout.ranks[1].numa_node == 1);
  CHECK(layout.plan_json.empty());
  check_layout(layout);

  CHECK(layout_for_size(8 * kGiB, 4, 2 * kMiB).chunk_count == 1024);
  CHECK_THROWS_WITH_AS(layout_for_size(3 * kMiB, 2, 2 * kMiB),
                       "--size 3.00 MiB over 2 ranks gives 1.50 MiB per rank, less than one --chunk of 2.00 MiB", Error);
  CHECK_THROWS_AS(layout_for_size(kGiB, 0, 2 * kMiB), Error);
  CHECK_THROWS_AS(layout_for_size(kGiB, 1, 0), Error);
}

TEST_CASE("check_layout names the field at fault") {
  ArenaLayout layout = layout_for_size(4 * kMiB, 2, kMiB);
  ArenaLayout bad = layout;
  bad.tp = 0;
  CHECK_THROWS_WITH_AS(check_layout(bad), "layout has tp 0 and pp 1: both must be at least 1", Error);
  bad = layout;
  bad.pp = 2;
  CHECK_THROWS_WITH_AS(check_layout(bad), "layout has 2 ranks, tp * pp = 2 * 2 = 4", Error);
  bad = layout;
  bad.ranks[1].pp_rank = 1;
  CHECK_THROWS_WITH_AS(check_layout(bad), "rank (tp 1, pp 1) is outside tp 2 x pp 1", Error);
  bad = layout;
  bad.blocks_per_chunk = 0;
  CHECK_THROWS_WITH_AS(check_layout(bad), "layout has blocks_per_chunk 0", Error);
  bad = layout;
  bad.chunk_count = 0;
  CHECK_THROWS_WITH_AS(check_layout(bad), "layout has chunk_count 0", Error);
  bad = layout;
  bad.ranks[0].numa_node = -2;
  CHECK_THROWS_WITH_AS(check_layout(bad), "rank (tp 0, pp 0) has NUMA node -2", Error);
  bad = layout;
  bad.plan_json.assign(kMaxPlanJsonBytes + 1, ' ');
  CHECK_THROWS_AS(check_layout(bad), Error);
  bad = layout;
  bad.tp = 65537;
  CHECK_THROWS_WITH_AS(check_layout(bad), "layout has tp * pp = 65537 ranks, more than 65536", Error);
}

}  // namespace hugepin
