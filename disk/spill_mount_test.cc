// The disk tier on file systems mounted for the test (root): a small tmpfs that fills up (ENOSPC
// from io_uring mid-write, and a snapshot save that cannot fit), and a ramfs, which has no
// O_DIRECT (the natural fallback to the thread pool). Skips (77) without root.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>

#include "base/error.h"
#include "base/pattern.h"
#include "base/size.h"
#include "disk/block_io.h"
#include "disk/snapshot.h"
#include "disk/spill.h"
#include "disk/test_disk.h"
#include "hugemem/arena.h"
#include "tests/support/error_text.h"
#include "tests/support/gate.h"
#include "tests/support/temp_dir.h"

namespace hugepin {
namespace {

// A file system mounted on a fresh directory for one test; unmounted when done.
class Mount {
 public:
  Mount(const std::string& type, const std::string& options) {
    if (::mount(type.c_str(), dir_.path().c_str(), type.c_str(), 0, options.c_str()) != 0) {
      FAIL("cannot mount ", type, " on ", dir_.path());
    }
  }
  ~Mount() { ::umount(dir_.path().c_str()); }
  const std::string& path() const { return dir_.path(); }

 private:
  test::TempDir dir_{"/tmp"};
};

struct TestArena {
  test::TempDir shm{"/dev/shm"};
  ArenaOptions options;
  std::vector<MappedRegion> regions;
  TestArena(const std::string& name, uint32_t ranks, uint64_t bytes) {
    options.page_size = 4 * kKiB;
    options.shm_dir = shm.path();
    options.prefault_threads = 1;
    create_arena(real_os(), name, split_evenly(bytes * ranks, ranks), options);
    for (uint32_t rank = 0; rank < ranks; ++rank) regions.push_back(open_region(real_os(), name, rank, true, options));
  }
  void fill(uint64_t seed) {
    for (size_t r = 0; r < regions.size(); ++r) fill_pattern(regions[r].data(), regions[r].size(), seed * 10 + r);
  }
  bool holds(uint64_t seed) const {
    for (size_t r = 0; r < regions.size(); ++r) {
      if (find_pattern_mismatch(regions[r].data(), regions[r].size(), seed * 10 + r)) return false;
    }
    return true;
  }
  SnapshotOptions snapshot_options() const {
    SnapshotOptions snapshot;
    snapshot.chunk_bytes = 512 * kKiB;
    snapshot.where = options;
    return snapshot;
  }
};

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

using test::contains;

}  // namespace

TEST_CASE("a full tmpfs: io_uring names the offset where ENOSPC struck" * doctest::skip(!test::io_uring_available())) {
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

TEST_CASE("a full file system: the save fails clearly, the previous snapshot stays whole, nothing is left over") {
  TestArena arena("hp-spill-full", 2, 3 * kMiB);
  Mount tmpfs("tmpfs", "size=10m,mode=0700");
  const std::string dir = tmpfs.path() + "/snapshot";
  arena.fill(1);
  save_snapshot(real_os(), "hp-spill-full", dir, arena.snapshot_options());  // 6 MiB of 10
  arena.fill(2);
  try {
    save_snapshot(real_os(), "hp-spill-full", dir, arena.snapshot_options());  // needs 6 more
    FAIL("a save into a full file system succeeded");
  } catch (const Error& error) {
    CHECK(error.errno_value() == ENOSPC);
    CHECK(contains(error.what(), "cannot save rank 1 of arena 'hp-spill-full': cannot allocate 3.00 MiB for spill file " +
                                     dir + "/.tmp-"));
    CHECK(contains(error.what(), "No space left on device (ENOSPC 28)"));
  }
  CHECK(names_in(dir) == std::set<std::string>{".lock", "data-1", "manifest.json"});
  arena.fill(3);
  load_snapshot(real_os(), "hp-spill-full", dir, arena.snapshot_options());
  CHECK(arena.holds(1));
}

TEST_CASE("ramfs has no O_DIRECT: spill and snapshots fall back to a buffered thread pool") {
  TestArena arena("hp-spill-ramfs", 2, 2 * kMiB);
  Mount ramfs("ramfs", "mode=0700");
  arena.fill(4);
  {
    SpillFile file = SpillFile::open(real_os(), ramfs.path() + "/rank-0.spill",
                                     {arena.regions[0].data(), arena.regions[0].size()}, {});
    CHECK_FALSE(file.backend().uring);
    CHECK_FALSE(file.backend().direct);
    CHECK(contains(file.backend().fallback, "does not support O_DIRECT (open: EINVAL)"));
    REQUIRE(file.spill({0}).wait().ok());
  }
  SnapshotReport saved = save_snapshot(real_os(), "hp-spill-ramfs", ramfs.path(), arena.snapshot_options());
  CHECK(contains(saved.backend, "buffered"));
  CHECK(contains(saved.fallback, "does not support O_DIRECT"));
  arena.fill(5);
  load_snapshot(real_os(), "hp-spill-ramfs", ramfs.path(), arena.snapshot_options());
  CHECK(arena.holds(4));
}

}  // namespace hugepin

namespace {

// True when this process may mount (root with CAP_SYS_ADMIN, outside a locked-down container).
bool can_mount() {
  if (geteuid() != 0) return false;
  hugepin::test::TempDir dir("/tmp");
  if (::mount("tmpfs", dir.path().c_str(), "tmpfs", 0, "size=1m") != 0) return false;
  ::umount(dir.path().c_str());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  return hugepin::test::run_or_skip(argc, argv, can_mount() ? "" : "root allowed to mount (tmpfs and ramfs)");
}
