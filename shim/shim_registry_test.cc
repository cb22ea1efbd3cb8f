#include "shim/shim_registry.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "base/size.h"
#include "hugemem/naming.h"
#include "ipc/arena_control.h"
#include "shim/table_writer.h"
#include "tests/support/error_text.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace hugepin {
namespace {

std::string own_table(const test::TempDir& dir) { return cat(dir.path(), "/hugepin-shim-table.", getpid()); }

void write_file(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary) << contents;
}

std::string read_file(const std::string& path) {
  std::string contents;
  REQUIRE(real_os().read_data_file(path, &contents) == 0);
  return contents;
}

}  // namespace

TEST_CASE("allocations published by the writer are read back, and retracted ones disappear") {
  test::TempDir dir("/dev/shm");
  std::unique_ptr<TableWriter> writer = TableWriter::create(real_os(), dir.path());
  CHECK(writer->path() == own_table(dir));
  struct stat st {};
  REQUIRE(stat(writer->path().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  TableEntry arena{0x7f0000000000, 3 * kMiB + 1, 4 * kMiB, 2 * kMiB, 1, shim_table::Backing::kArena, "kv", 3,
                   shim_table::Api::kRuntime, 2};
  TableEntry mine{0x7f1000000000, kGiB, kGiB, kGiB, -1, shim_table::Backing::kPrivate, "", 0, shim_table::Api::kDriver, 0};
  int first = writer->publish(arena);
  int second = writer->publish(mine);
  CHECK(first != second);

  ShimTable table = read_shim_table(real_os(), writer->path());
  CHECK(table.problem.empty());
  CHECK(table.pid == getpid());
  CHECK(table.alive);
  CHECK(table.uid == getuid());
  CHECK(table.program == read_file("/proc/self/comm").substr(0, read_file("/proc/self/comm").size() - 1));
  REQUIRE(table.allocations.size() == 2);
  const ShimAllocation& a = table.allocations[0];
  CHECK(a.address == 0x7f0000000000);
  CHECK(a.bytes_asked == 3 * kMiB + 1);
  CHECK(a.bytes_given == 4 * kMiB);
  CHECK(a.page_size == 2 * kMiB);
  CHECK(a.node == 1);
  CHECK(a.backing == "arena");
  CHECK(a.arena == "kv");
  CHECK(a.rank == 3);
  CHECK(a.api == "runtime");
  CHECK(a.flags == 2);
  CHECK(a.time_ns > 0);
  CHECK(table.allocations[1].backing == "private");
  CHECK(table.allocations[1].api == "driver");
  CHECK(table.bytes_asked() == 3 * kMiB + 1 + kGiB);
  CHECK(table.bytes_given() == 4 * kMiB + kGiB);

  writer->retract(first);
  table = read_shim_table(real_os(), writer->path());
  REQUIRE(table.allocations.size() == 1);
  CHECK(table.allocations[0].address == 0x7f1000000000);
  // A freed slot is used again.
  CHECK(writer->publish(arena) >= 0);
  CHECK(read_shim_table(real_os(), writer->path()).allocations.size() == 2);
}

TEST_CASE("a full table refuses more allocations") {
  test::TempDir dir("/dev/shm");
  std::unique_ptr<TableWriter> writer = TableWriter::create(real_os(), dir.path());
  TableEntry entry{1, 1, 4096, 4096, 0, shim_table::Backing::kPrivate, "", 0, shim_table::Api::kRuntime, 0};
  for (uint32_t i = 0; i < shim_table::kCapacity; ++i) REQUIRE(writer->publish(entry) >= 0);
  CHECK(writer->publish(entry) == -1);
  writer->retract(17);
  CHECK(writer->publish(entry) == 17);
  CHECK(read_shim_table(real_os(), writer->path()).allocations.size() == shim_table::kCapacity);
}

TEST_CASE("creating a table removes the tables this user's dead processes left") {
  test::TempDir dir("/dev/shm");
  std::string stale;
  {
    std::unique_ptr<TableWriter> first = TableWriter::create(real_os(), dir.path());
    stale = read_file(first->path());
  }
  int32_t gone = 999999998;
  std::memcpy(stale.data() + 24, &gone, sizeof gone);
  write_file(dir.path() + "/hugepin-shim-table.999999998", stale);
  write_file(dir.path() + "/hugepin-shim-table.999999997", "not a table: kept, it may be one being written");
  std::unique_ptr<TableWriter> writer = TableWriter::create(real_os(), dir.path());
  std::vector<ShimTable> tables = list_shim_tables(real_os(), dir.path());
  REQUIRE(tables.size() == 2);
  CHECK(tables[0].pid == getpid());
  CHECK(tables[1].pid == 999999997);
}

TEST_CASE("a table left by this pid before is replaced") {
  test::TempDir dir("/dev/shm");
  write_file(own_table(dir), "left by a dead process with our pid");
  std::unique_ptr<TableWriter> writer = TableWriter::create(real_os(), dir.path());
  CHECK(read_shim_table(real_os(), writer->path()).problem.empty());
}

TEST_CASE("truncated, corrupt and foreign files give a message, not a crash") {
  test::TempDir dir("/dev/shm");
  std::unique_ptr<TableWriter> writer = TableWriter::create(real_os(), dir.path());
  writer->publish(TableEntry{1, 1, 4096, 4096, 0, shim_table::Backing::kPrivate, "", 0, shim_table::Api::kRuntime, 0});
  const std::string good = read_file(writer->path());
  auto problem_of = [&](const std::string& name, const std::string& contents) {
    std::string path = dir.path() + "/" + name;
    write_file(path, contents);
    return read_shim_table(real_os(), path).problem;
  };
  CHECK(problem_of("hugepin-shim-table.1", "").find("less than a table header: truncated") != std::string::npos);
  CHECK(problem_of("hugepin-shim-table.2", good.substr(0, 4096)).find("cannot hold its 4096 records: truncated") !=
        std::string::npos);
  std::string bad_magic = good;
  bad_magic[0] = 'X';
  CHECK(problem_of("hugepin-shim-table.3", bad_magic).find("bad magic") != std::string::npos);
  std::string version = good;
  version[8] = 9;
  CHECK(problem_of("hugepin-shim-table.4", version).find("layout version 9") != std::string::npos);
  std::string sizes = good;
  sizes[16] = 1;  // record_size
  CHECK(problem_of("hugepin-shim-table.5", sizes).find("corrupt") != std::string::npos);
  CHECK(problem_of("hugepin-shim-table.6", good).find("written by pid") != std::string::npos);
  CHECK(read_shim_table(real_os(), dir.path() + "/hugepin-shim-table.404").problem.find("cannot read") == 0);
}

TEST_CASE("list_shim_tables finds every table; stale ones are told apart and removed") {
  test::TempDir dir("/dev/shm");
  std::unique_ptr<TableWriter> writer = TableWriter::create(real_os(), dir.path());
  std::string stale = read_file(writer->path());
  int32_t gone = 999999999;  // above any pid_max
  std::memcpy(stale.data() + 24, &gone, sizeof gone);
  write_file(dir.path() + "/hugepin-shim-table.999999999", stale);
  write_file(dir.path() + "/hugepin-shim-table.12x", "not a table name");
  write_file(dir.path() + "/other", "");

  std::vector<ShimTable> tables = list_shim_tables(real_os(), dir.path());
  REQUIRE(tables.size() == 2);
  CHECK(tables[0].pid == getpid());
  CHECK(tables[0].alive);
  CHECK(tables[1].pid == gone);
  CHECK_FALSE(tables[1].alive);
  CHECK(tables[1].problem.empty());

  CHECK(remove_stale_shim_tables(real_os(), dir.path(), getuid() + 1) == 0);  // another user's: kept
  CHECK(remove_stale_shim_tables(real_os(), dir.path(), getuid()) == 1);
  CHECK(list_shim_tables(real_os(), dir.path()).size() == 1);
  CHECK(list_shim_tables(real_os(), dir.path() + "/missing").empty());
}

TEST_CASE("a reused pid is not mistaken for the table's process") {
  test::TempDir root;
  std::filesystem::create_directories(cat(root.path(), "/proc/", getpid()));
  std::unique_ptr<Os> os = make_rooted_os(root.path());
  test::TempDir dir("/dev/shm");
  std::unique_ptr<TableWriter> writer = TableWriter::create(real_os(), dir.path());
  // The same pid, started at another time: another process.
  write_file(cat(root.path(), "/proc/", getpid(), "/stat"),
             cat(getpid(), " (a (b) c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20\n"));
  CHECK_FALSE(read_shim_table(*os, writer->path()).alive);
  CHECK(process_start_ticks(*os, getpid()) == 19u);
  CHECK_FALSE(process_start_ticks(*os, getpid() + 1));
}

TEST_CASE("table file names") {
  CHECK(parse_shim_table_name("hugepin-shim-table.42") == 42);
  CHECK_FALSE(parse_shim_table_name("hugepin-shim-table."));
  CHECK_FALSE(parse_shim_table_name("hugepin-shim-table.-1"));
  CHECK_FALSE(parse_shim_table_name("hugepin-shim-table.0"));
  CHECK_FALSE(parse_shim_table_name("hugepin.kv"));
}

// Issue 20, item 3: tables were /dev/shm/hugepin.shim.<pid>, the control segment of an arena named
// "shim.<pid>": creating such an arena worked, and the shim of a process with that pid deleted it.
TEST_CASE("no arena name reaches a shim table: arena 'shim.<pid>' and the table of <pid> live side by side") {
  const std::string arena = cat("shim.", getpid());
  test::TempDir data("/dev/shm");
  ArenaLayout layout;
  layout.tp = 1;
  layout.pp = 1;
  layout.blocks_per_chunk = 1;
  layout.chunk_count = 1;
  layout.ranks.push_back({0, 0, 4096, 4096, -1});
  ArenaOptions options;
  options.page_size = 4096;
  options.shm_dir = data.path();
  create_arena_with_control(real_os(), arena, layout, options);
  std::unique_ptr<TableWriter> writer = TableWriter::create(real_os(), std::string(kControlSegmentDir));
  CHECK(arena_of_segment_file(writer->path().substr(writer->path().rfind('/') + 1)).empty());
  CHECK(ControlSegment::open(real_os(), arena, SegmentAccess::kReadOnly).header().arena == arena);
  for (const ArenaEntry& entry : list_arenas_with_control(real_os(), options)) {
    CHECK_MESSAGE(entry.name.rfind("shim-table", 0) != 0, entry.name);
  }
  destroy_arena_with_control(real_os(), arena, options);
  CHECK(read_shim_table(real_os(), writer->path()).problem.empty());
  unlink(writer->path().c_str());  // the exit handler removes only the last table this process made
}

TEST_CASE("a planted table is reported, never followed, waited on or believed") {
  test::TempDir dir("/dev/shm");
  REQUIRE(chmod(dir.path().c_str(), 01777) == 0);
  std::string real;
  {
    std::unique_ptr<TableWriter> writer = TableWriter::create(real_os(), dir.path());
    real = read_file(writer->path());
  }
  REQUIRE(unlink(own_table(dir).c_str()) == 0);
  const std::string target = dir.path() + "/root-table";
  write_file(target, real);
  REQUIRE(test::run_as_nobody([&] {
            // Root's table, copied as this user's file and named for pid 1: it claims root's uid.
            std::string copy = real;
            const int32_t pid = 1;
            std::memcpy(copy.data() + 24, &pid, sizeof pid);
            std::ofstream(dir.path() + "/hugepin-shim-table.1") << copy;
            return symlink(target.c_str(), (dir.path() + "/hugepin-shim-table.11").c_str()) == 0 &&
                   mkfifo((dir.path() + "/hugepin-shim-table.12").c_str(), 0666) == 0;
          }) == 0);
  std::vector<ShimTable> tables = list_shim_tables(real_os(), dir.path());  // a FIFO would hang it
  REQUIRE(tables.size() == 3);
  CHECK(test::contains(tables[0].problem, "claims uid 0 but belongs to uid 65534"));
  CHECK(test::contains(tables[1].problem, "it is a symbolic link"));
  CHECK(test::contains(tables[2].problem, "it is a FIFO"));
  CHECK(remove_stale_shim_tables(real_os(), dir.path(), 0) == 0);  // none of them is root's to remove
  CHECK(list_shim_tables(real_os(), dir.path()).size() == 3);
}

}  // namespace hugepin
