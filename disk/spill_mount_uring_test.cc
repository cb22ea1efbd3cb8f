// io_uring on a small tmpfs mounted for the test that fills up: the ENOSPC mid-write names its
// offset. Skips (77) without io_uring or where this process may not mount.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "base/size.h"
#include "disk/block_io.h"
#include "disk/test_disk.h"
#include "disk/test_mount.h"
#include "tests/support/error_text.h"
#include "tests/support/gate.h"

namespace hugepin {

using test::contains;
using test::Mount;

TEST_CASE("a full tmpfs: io_uring names the offset where ENOSPC struck") {
  Mount tmpfs("tmpfs", "size=4m,mode=0700");
  const std::string path = tmpfs.path() + "/full";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  const uint64_t bytes = 6 * kMiB;
  void* memory = std::aligned_alloc(4096, bytes);
  REQUIRE(memory != nullptr);
  std::vector<BlockSpan> spans;
  for (uint64_t i = 0; i < 6; ++i) spans.push_back({i * kMiB, static_cast<std::byte*>(memory) + i * kMiB, kMiB});
  {
    UringOptions options;
    options.queue_depth = 1;  // in order: the fifth MiB is the first that cannot fit
    std::unique_ptr<BlockIo> io = make_uring_block_io({fd, path, true, 4096}, options);
    BlockResult result = run_blocking(*io, BlockOp::kWrite, spans);
    REQUIRE(result.failures.size() == 2);
    CHECK(result.failures[0].span == 4);
    CHECK(result.failures[0].errno_value == ENOSPC);
    CHECK(contains(result.failures[0].message, "cannot write " + path + " at offset "));
    CHECK(contains(result.failures[0].message, "No space left on device (ENOSPC 28)"));
    CHECK(result.bytes == 4 * kMiB);
  }
  ::close(fd);
  std::free(memory);
}

}  // namespace hugepin

int main(int argc, char** argv) {
  return hugepin::test::run_or_skip(argc, argv, {hugepin::test::missing_io_uring(), hugepin::test::missing_mount()});
}
