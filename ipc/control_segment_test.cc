// Control segments: creation from a layout, the header and records read back, refusal of bad
// magic, version and truncation with a message, read-only opens, permissions, and creation
// failures that leave nothing behind.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "base/size.h"
#include "hugemem/naming.h"
#include "ipc/arena_control.h"
#include "ipc/rank_attachment.h"
#include "ipc/test_arena.h"
#include "tests/support/error_text.h"
#include "tests/support/fault_os.h"

namespace hugepin {
namespace {

using test::error_of;
using test::contains;

// Overwrites `bytes` at `offset` of file `path`.
void poke(const std::string& path, uint64_t offset, const void* bytes, size_t size) {
  int fd = ::open(path.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  REQUIRE(pwrite(fd, bytes, size, static_cast<off_t>(offset)) == static_cast<ssize_t>(size));
  ::close(fd);
}

bool exists(const std::string& path) { return std::filesystem::exists(path); }

constexpr gid_t kNogroup = 65534;
constexpr uid_t kNobody = 65534;

// In a child: become uid/gid 65534 (member of group 65534), then run `body`.
bool as_nobody(const std::function<bool()>& body) {
  gid_t groups[] = {kNogroup};
  if (setgroups(1, groups) != 0 || setgid(kNogroup) != 0 || setuid(kNobody) != 0) return false;
  return body();
}

}  // namespace

TEST_CASE("a created segment reads back its header, records and plan") {
  ArenaLayout layout = test::small_layout(2, 2, 3);
  layout.plan_json = R"({"tp":2,"pp":2})";
  layout.ranks[3].numa_node = 0;
  test::TestArena arena("create", layout, ControlOptions{64});
  const std::string path = control_segment_path(arena.name());
  CHECK(arena.created().segment_path == path);

  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(static_cast<uint64_t>(st.st_size) == arena.created().segment_bytes);

  ControlSegment segment = ControlSegment::open(real_os(), arena.name(), SegmentAccess::kReadOnly);
  const SegmentHeader& header = segment.header();
  CHECK(header.arena == arena.name());
  CHECK(header.layout_version == kControlLayoutVersion);
  CHECK(header.creator_pid == getpid());
  CHECK(header.creator_uid == geteuid());
  CHECK(header.created_realtime_ns > 0);
  CHECK(header.tp == 2);
  CHECK(header.pp == 2);
  CHECK(header.rank_count == 4);
  CHECK(header.ring_capacity == 64);
  CHECK(header.blocks_per_chunk == 1);
  CHECK(header.chunk_count == 3);
  CHECK(segment.view().plan_json == layout.plan_json);
  CHECK(segment.view().block->generation.load() == 1);
  CHECK(segment.view().block->self_offset < kControlScanBytes);
  for (uint32_t rank = 0; rank < 4; ++rank) {
    const RegionRecord& record = segment.view().regions[rank];
    CHECK(record.rank == rank);
    CHECK(record.tp_rank == rank % 2);
    CHECK(record.pp_rank == rank / 2);
    CHECK(record.page_size == 4 * kKiB);
    CHECK(record.chunk_count == 3);
    CHECK(record.payload_bytes_per_block == 16 * kKiB + record.pp_rank * 4 * kKiB);
    CHECK(record.bytes == 3 * record.payload_bytes_per_block);
    CHECK(std::string(segment.view().backing_paths[rank]) == cat(arena.dir(), "/hugepin/", arena.name(), "/rank-", rank));
    CHECK(status_state(record.status.load()) == static_cast<uint8_t>(RankState::kCreated));
    CHECK(record.owner.load() == 0);
    CHECK(segment.view().rings[rank]->capacity() == 64);
    CHECK(segment.view().rings[rank]->depth() == 0);
    CHECK(&segment.view().rings[rank]->data_doorbell() == segment.view().doorbell);
  }
  CHECK(segment.view().regions[3].node_requested == 0);
  CHECK(segment.view().regions[0].node_requested == -1);
}

TEST_CASE("a read-only open refuses every writable part") {
  test::TestArena arena("readonly");
  ControlSegment segment = ControlSegment::open(real_os(), arena.name(), SegmentAccess::kReadOnly);
  CHECK(contains(error_of([&] { segment.region(0); }), "is open read-only"));
  CHECK_THROWS_AS(segment.ring(0), Error);
  CHECK_THROWS_AS(segment.doorbell(), Error);
  CHECK_THROWS_AS(segment.scheduler_counters(), Error);
  CHECK_THROWS_AS(segment.block(), Error);
  ControlSegment writable = ControlSegment::open(real_os(), arena.name(), SegmentAccess::kReadWrite);
  CHECK(writable.region(1).rank == 1);
}

TEST_CASE("an existing arena or segment is not created again, and not harmed") {
  test::TestArena arena("exists");
  ArenaOptions options = arena.options();
  CHECK(contains(error_of([&] { create_arena_with_control(real_os(), arena.name(), test::small_layout(2, 1), options); }),
                 "already exists"));
  CHECK(contains(error_of([&] {
          create_control_segment(real_os(), arena.name(), test::small_layout(2, 1), arena.created().data.regions, {});
        }),
        "already has a control segment"));
  ControlSegment segment = ControlSegment::open(real_os(), arena.name(), SegmentAccess::kReadOnly);
  CHECK(segment.header().rank_count == 2);
  CHECK(exists(arena.created().data.regions[0].path));
}

TEST_CASE("a create that loses the race for the segment removes its own files only, not the winner's") {
  // The winner's arena, its data in one root.
  test::TestArena winner("race");
  // The loser passes the existence check (the winner's segment appears just after it), makes its
  // data in another root, then finds the segment taken.
  test::TempDir other_root("/dev/shm");
  ArenaOptions options = winner.options();
  options.shm_dir = other_root.path();
  test::FaultInjectionOs os(real_os());
  os.fail("open", ENOENT);  // the first open is the existence check
  CHECK(contains(error_of([&] { create_arena_with_control(os, winner.name(), test::small_layout(2, 1), options); }),
                 "already has a control segment"));
  CHECK_FALSE(exists(arena_data_dir(other_root.path(), winner.name())));  // the loser's data: gone
  ControlSegment segment = ControlSegment::open(real_os(), winner.name(), SegmentAccess::kReadOnly);
  CHECK(segment.header().rank_count == 2);
  for (const RegionReport& region : winner.created().data.regions) CHECK(exists(region.path));
}

TEST_CASE("a bad layout is refused before anything is made") {
  test::TempDir dir("/dev/shm");
  ArenaOptions options;
  options.page_size = 4 * kKiB;
  options.shm_dir = dir.path();
  const std::string name = test::unique_arena_name("badlayout");
  auto create = [&](ArenaLayout layout) {
    return error_of([&] { create_arena_with_control(real_os(), name, layout, options); });
  };
  ArenaLayout layout = test::small_layout(2, 2);
  layout.ranks.pop_back();
  CHECK(contains(create(layout), "layout has 3 ranks, tp * pp = 2 * 2 = 4"));
  layout = test::small_layout(2, 1);
  layout.ranks[1].tp_rank = 0;
  CHECK(contains(create(layout), "rank (tp 0, pp 0) is given twice"));
  layout = test::small_layout(2, 1);
  layout.ranks[0].region_bytes -= 1;
  CHECK(contains(create(layout), "less than its 4 chunks need"));
  layout = test::small_layout(2, 1);
  layout.ranks[1].payload_bytes_per_block = 0;
  CHECK(contains(create(layout), "payload_bytes_per_block 0"));
  layout = test::small_layout(1, 1);
  layout.chunk_count = uint64_t{1} << 40;
  layout.ranks[0].payload_bytes_per_block = uint64_t{1} << 30;
  CHECK(contains(create(layout), "overflow 64 bits"));
  CHECK(contains(error_of([&] { create_arena_with_control(real_os(), name, test::small_layout(1, 1), options, {100}); }),
                 "ring capacity 100"));
  CHECK_FALSE(exists(control_segment_path(name)));
  CHECK(list_arenas(real_os(), options).empty());
}

TEST_CASE("a failure after the regions were made removes them and the segment") {
  // A data directory so deep that the backing paths do not fit the segment's 255 bytes.
  test::TempDir dir("/dev/shm");
  std::string deep = dir.path() + "/" + std::string(200, 'd');
  std::filesystem::create_directories(deep);
  ArenaOptions options;
  options.page_size = 4 * kKiB;
  options.shm_dir = deep;
  const std::string name = test::unique_arena_name("deep");
  CHECK(contains(error_of([&] { create_arena_with_control(real_os(), name, test::small_layout(2, 1), options); }),
                 "is longer than the 255 bytes"));
  CHECK_FALSE(exists(control_segment_path(name)));
  CHECK(list_arenas(real_os(), options).empty());
}

TEST_CASE("bad magic, another layout version and truncation are refused with a message") {
  test::TestArena arena("corrupt");
  const std::string path = control_segment_path(arena.name());
  uint64_t block_offset = 0;
  {
    ControlSegment segment = ControlSegment::open(real_os(), arena.name(), SegmentAccess::kReadOnly);
    block_offset = segment.view().block->self_offset;
  }
  auto open_error = [&] { return error_of([&] { ControlSegment::open(real_os(), arena.name(), SegmentAccess::kReadOnly); }); };

  uint32_t version = kControlLayoutVersion + 1;
  poke(path, block_offset + offsetof(ControlBlock, layout_version), &version, sizeof version);
  std::string message = open_error();
  CHECK(contains(message, path));
  CHECK(contains(message, cat("layout version ", kControlLayoutVersion + 1, ", this hugepin reads version ",
                              kControlLayoutVersion)));
  version = kControlLayoutVersion;
  poke(path, block_offset + offsetof(ControlBlock, layout_version), &version, sizeof version);
  CHECK(open_error().empty());

  uint64_t magic = 0x0123456789abcdef;
  poke(path, block_offset, &magic, sizeof magic);
  CHECK(contains(open_error(), "no control block in the first 64.00 KiB"));
  magic = kControlMagic;
  poke(path, block_offset, &magic, sizeof magic);
  CHECK(open_error().empty());

  uint64_t self_offset = block_offset + 128;  // a magic whose self-offset disagrees is not the block
  poke(path, block_offset + offsetof(ControlBlock, self_offset), &self_offset, sizeof self_offset);
  CHECK(contains(open_error(), "no control block"));
  poke(path, block_offset + offsetof(ControlBlock, self_offset), &block_offset, sizeof block_offset);

  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size / 2);
  CHECK(contains(open_error(), cat("control segment is ", size / 2, " bytes, its header says ", size, " (truncated?)")));
  std::filesystem::resize_file(path, 100);
  CHECK(contains(open_error(), "is 100 bytes: too short to hold a control block"));
  std::filesystem::resize_file(path, 0);
  CHECK(contains(open_error(), "is 0 bytes"));
}

TEST_CASE("an unknown arena is named in the error") {
  std::string message = error_of([] { ControlSegment::open(real_os(), "no-such-arena-xyz", SegmentAccess::kReadOnly); });
  CHECK(contains(message, "arena 'no-such-arena-xyz' has no control segment (/dev/shm/hugepin.no-such-arena-xyz)"));
  CHECK(contains(error_of([] { ControlSegment::open(real_os(), "../etc", SegmentAccess::kReadOnly); }),
                 "invalid arena name '../etc'"));
}

TEST_CASE("permissions: 0600 for its owner only, 0660 for its group") {
  test::TestArena owned("perm600");
  if (geteuid() != 0) {
    // Not root: another user's segment, as check_segment_access sees it.
    struct stat other {};
    other.st_uid = geteuid() + 1;
    other.st_mode = S_IFREG | 0600;
    CHECK(contains(error_of([&] { check_segment_access("x", other, SegmentAccess::kReadOnly); }), "with mode 0600"));
    return;
  }
  // Root: a child that becomes nobody is refused a 0600 segment, with the owner named...
  CHECK(test::run_in_child([&] {
          return as_nobody([&] {
            std::string message = error_of([&] { ControlSegment::open(real_os(), owned.name(), SegmentAccess::kReadOnly); });
            return contains(message, cat("arena '", owned.name(), "' belongs to uid 0 (root) with mode 0600")) &&
                   contains(message, "may read it");
          });
        }) == 0);
  // ...and may read and attach to one shared with its group.
  test::TestArena shared("perm660", test::small_layout(2, 1), {}, kNogroup);
  struct stat st {};
  REQUIRE(stat(control_segment_path(shared.name()).c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0660);
  CHECK(st.st_gid == kNogroup);
  std::filesystem::permissions(shared.dir(), std::filesystem::perms(0755));  // the test's own directory
  CHECK(test::run_in_child([&] {
          return as_nobody([&] {
            ControlSegment segment = ControlSegment::open(real_os(), shared.name(), SegmentAccess::kReadWrite);
            RankAttachment worker = test::attach_rank(shared, 1, 0);  // maps its region
            worker.region().data()[0] = std::byte{1};
            worker.detach();
            return segment.header().rank_count == 2;
          });
        }) == 0);
}

TEST_CASE("a segment of 256 ranks fits its computed size") {
  ArenaLayout layout = test::small_layout(8, 32, 1, 4 * kKiB);
  for (RankRegionLayout& rank : layout.ranks) {
    rank.payload_bytes_per_block = 4 * kKiB;
    rank.region_bytes = 4 * kKiB;
  }
  test::TestArena arena("wide", layout, ControlOptions{1024});
  ControlSegment segment = ControlSegment::open(real_os(), arena.name(), SegmentAccess::kReadOnly);
  CHECK(segment.header().rank_count == 256);
  CHECK(segment.view().regions[255].tp_rank == 7);
  CHECK(segment.view().regions[255].pp_rank == 31);
}

TEST_CASE("list and destroy see the segment and the data together") {
  test::TestArena arena("listdestroy");
  std::vector<ArenaEntry> entries = list_arenas_with_control(real_os(), arena.options());
  auto found = std::find_if(entries.begin(), entries.end(), [&](const ArenaEntry& e) { return e.name == arena.name(); });
  REQUIRE(found != entries.end());
  REQUIRE(found->control);
  CHECK(found->control->path == control_segment_path(arena.name()));
  CHECK(found->control->mode == 0600);
  CHECK(found->regions.size() == 2);

  ArenaDestroyed destroyed = destroy_arena_with_control(real_os(), arena.name(), arena.options());
  CHECK(destroyed.control_removed);
  CHECK(destroyed.region_files == 2);
  CHECK_FALSE(exists(control_segment_path(arena.name())));
  CHECK(contains(error_of([&] { destroy_arena_with_control(real_os(), arena.name(), arena.options()); }),
                 cat("no arena named '", arena.name(), "'")));
}

TEST_CASE("destroy says so when a data directory cannot go (it holds a file hugepin did not make)") {
  test::TestArena arena("destroyforeign");
  const std::string dir = arena_data_dir(arena.dir(), arena.name());
  std::ofstream(dir + "/notes.txt") << "mine";
  CHECK(contains(error_of([&] { destroy_arena_with_control(real_os(), arena.name(), arena.options()); }),
                 "holds files hugepin did not create"));
  CHECK(exists(dir + "/notes.txt"));
  std::filesystem::remove_all(dir);
}

// Issue 20, item 5: `truncate -s 0 /dev/shm/hugepin.<arena>` during a run killed the scheduler
// with SIGBUS. In a child, so that a death shows as a failed test rather than a dead runner.
TEST_CASE("a segment truncated under the scheduler and a worker stops them with a message; neither dies") {
  test::TestArena arena("truncated");
  const int status = test::run_in_child([&] {
    ArenaControl scheduler = ArenaControl::adopt(real_os(), arena.name());
    RankAttachment worker = test::attach_rank(arena, 1, 0);
    if (truncate(control_segment_path(arena.name()).c_str(), 0) != 0) return false;
    Report out[8];
    const std::string consumed = error_of([&] { scheduler.consume(0, out); });
    const std::string published = error_of([&] { scheduler.publish({}); });
    const std::string posted = error_of([&] { worker.post(ReportKind::kHeartbeat, 1); });
    const std::string expected = cat("control segment ", control_segment_path(arena.name()), " was truncated under this process");
    for (const std::string& why : {consumed, published, posted}) {
      if (!contains(why, expected)) {
        std::fprintf(stderr, "unexpected: '%s'\n", why.c_str());
        return false;
      }
    }
    return true;
  });
  CHECK(status == 0);  // -1: killed by a signal (SIGBUS)
}

// Issue 20, item 4: a restarted worker mapped whatever backing path the segment recorded, checking
// only its size; rewriting rank 1's path made the replacement write into a chosen file.
TEST_CASE("a worker maps its region by the arena's name, never a path rewritten in the segment") {
  test::TestArena arena("rewritten");
  const std::string victim = arena.dir() + "/victim";
  const uint64_t bytes = arena.created().data.regions[1].bytes;
  {
    std::ofstream out(victim);
    out << std::string(bytes, '\0');
  }
  REQUIRE(chmod(victim.c_str(), 0600) == 0);
  {
    ControlSegment segment = ControlSegment::open(real_os(), arena.name(), SegmentAccess::kReadWrite);
    RegionRecord& record = segment.region(1);
    REQUIRE(victim.size() < sizeof record.backing_path);
    std::memcpy(record.backing_path, victim.c_str(), victim.size() + 1);
  }
  const std::string why = error_of([&] { RankAttachment worker = test::attach_rank(arena, 1, 0); });
  CHECK(contains(why, cat("the control segment records region file '", victim, "', which is not the rank's file")));
  std::ifstream in(victim);
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(kept == std::string(bytes, '\0'));
  // The arena's own file for the rank is still attached by name once the record names it again.
  {
    ControlSegment segment = ControlSegment::open(real_os(), arena.name(), SegmentAccess::kReadWrite);
    const std::string own = arena.created().data.regions[1].path;
    std::memcpy(segment.region(1).backing_path, own.c_str(), own.size() + 1);
  }
  CHECK(test::attach_rank(arena, 1, 0).region().path() == arena.created().data.regions[1].path);
}

}  // namespace hugepin
