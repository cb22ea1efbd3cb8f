// Block I/O's pure parts: how spans are cut into requests. The cases on real files are in
// block_io_direct_test.cc (O_DIRECT) and block_io_uring_test.cc (io_uring), gated binaries.
#include "disk/block_io.h"

#include <doctest/doctest.h>

#include <vector>

#include "base/size.h"
#include "disk/detail/block_batch.h"

namespace hugepin {
namespace {

constexpr uint64_t kPage = 4096;

}  // namespace

TEST_CASE("requests are cut at the request size and at registered buffer edges") {
  std::byte* base = reinterpret_cast<std::byte*>(uintptr_t{1} << 30);
  std::vector<BlockSpan> spans{{0, base + 3 * kPage, 10 * kPage}, {kMiB, base + 20 * kPage, 2 * kPage}};
  std::vector<detail::BlockRequest> requests = detail::split_requests(spans, 4 * kPage, {base, 8 * kPage});
  std::vector<uint64_t> sizes;
  for (const detail::BlockRequest& request : requests) sizes.push_back(request.bytes / kPage);
  // Span 0 covers pages 3..12: cut at 4 pages and at the edge at page 8 and 16.
  CHECK(sizes == std::vector<uint64_t>{4, 1, 4, 1, 2});
  CHECK(requests[1].offset == 4 * kPage);
  CHECK(requests[2].data == base + 8 * kPage);
  CHECK(requests[4].span == 1);
  CHECK(detail::usable_request_bytes(1000, 4096) == 4096);
  CHECK(detail::usable_request_bytes(10000, 4096) == 8192);
  CHECK(detail::usable_request_bytes(4 * kGiB, 512) == kGiB);
}

}  // namespace hugepin
