// Arena snapshots on real files: a 4 KiB-page arena under /dev/shm saved to this machine's disk
// and loaded back (every byte checked), saves killed (SIGKILL) at every step and at random times,
// a corrupted data file, and snapshots that do not fit. Written by one I/O path and read by the
// other: snapshot_uring_test.cc (gated on io_uring).
#include "disk/snapshot.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "base/pattern.h"
#include "base/size.h"
#include "disk/test_disk.h"
#include "disk/test_snapshot.h"
#include "hugemem/arena.h"
#include "tests/support/child_process.h"
#include "tests/support/error_text.h"
#include "tests/support/file_text.h"
#include "tests/support/temp_dir.h"

namespace hugepin {
namespace {

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::trunc) << text; }

using test::contains;
using test::TestArena;

}  // namespace

TEST_CASE("an arena of three ranks round-trips through a snapshot on disk") {
  TestArena arena("hp-spill-snap", {5 * kMiB + 12 * kKiB, 3 * kMiB, kMiB});
  test::TempDir disk(test::kDiskDir);
  const std::string dir = disk.path() + "/snapshot";
  arena.fill(1);
  std::vector<uint64_t> progress;
  SnapshotOptions options = arena.snapshot_options(kMiB);
  options.progress = [&](uint64_t done, uint64_t total) {
    CHECK(total == 9 * kMiB + 12 * kKiB);
    progress.push_back(done);
  };
  SnapshotReport saved = save_snapshot(real_os(), "hp-spill-snap", dir, options);
  CHECK(saved.generation == 1);
  CHECK(saved.regions == 3);
  CHECK(saved.chunks == 6 + 3 + 1);
  CHECK(saved.bytes == 9 * kMiB + 12 * kKiB);
  CHECK(contains(saved.backend, test::missing_io_uring().empty() && test::missing_direct_io().empty() ? "io_uring" : "pread/pwrite"));
  CHECK(saved.fallback.empty());
  CHECK(!progress.empty());
  CHECK(progress.back() == saved.bytes);
  CHECK(names_in(dir) == std::set<std::string>{".lock", "data-1", "manifest.json"});
  CHECK(names_in(dir + "/data-1") == std::set<std::string>{"rank-0.data", "rank-1.data", "rank-2.data"});

  SnapshotManifest manifest = read_snapshot_manifest(real_os(), dir);
  CHECK(manifest.arena == "hp-spill-snap");
  REQUIRE(manifest.regions.size() == 3);
  CHECK(manifest.regions[0].chunks == 6);
  CHECK(manifest.regions[0].crc32c.size() == 6);
  CHECK(manifest.regions[0].page_size == 4 * kKiB);
  CHECK(manifest.regions[2].file == "data-1/rank-2.data");
  CHECK_FALSE(manifest.plan.has_value());

  arena.fill(2);  // anything else
  options.chunk_bytes = 0;  // the snapshot's
  SnapshotReport loaded = load_snapshot(real_os(), "hp-spill-snap", dir, options);
  CHECK(loaded.bytes == saved.bytes);
  CHECK(arena.holds(1));

  // A second save replaces the first and removes its data.
  arena.fill(3);
  options.chunk_bytes = kMiB;
  CHECK(save_snapshot(real_os(), "hp-spill-snap", dir, options).generation == 2);
  CHECK(names_in(dir) == std::set<std::string>{".lock", "data-2", "manifest.json"});
  arena.fill(4);
  load_snapshot(real_os(), "hp-spill-snap", dir, options);
  CHECK(arena.holds(3));
}

TEST_CASE("a corrupted chunk is named by rank and chunk, zero-filled, and the rest is loaded") {
  TestArena arena("hp-spill-corrupt", {2 * kMiB, 2 * kMiB});
  test::TempDir disk(test::kDiskDir);
  arena.fill(7);
  SnapshotOptions options = arena.snapshot_options();
  save_snapshot(real_os(), "hp-spill-corrupt", disk.path(), options);
  const std::string data = disk.path() + "/data-1/rank-1.data";
  {
    std::fstream file(data, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(5 * 256 * kKiB + 1234));
    char byte = 0;
    file.read(&byte, 1);
    file.seekp(static_cast<std::streamoff>(5 * 256 * kKiB + 1234));
    byte = static_cast<char>(byte ^ 0x01);
    file.write(&byte, 1);
  }
  arena.fill(8);
  try {
    load_snapshot(real_os(), "hp-spill-corrupt", disk.path(), options);
    FAIL("a corrupted snapshot loaded");
  } catch (const Error& error) {
    const std::string message = error.what();
    CHECK(contains(message, "rank 1 chunk 5 fails its checksum (" + data + " at offset 1310720: stored 0x"));
    CHECK(contains(message, "1 chunk failed and is zero-filled"));
  }
  CHECK_FALSE(find_pattern_mismatch(arena.regions[0].data(), 2 * kMiB, 700));
  std::vector<std::byte> zeros(256 * kKiB);
  CHECK(std::memcmp(arena.regions[1].data() + 5 * 256 * kKiB, zeros.data(), zeros.size()) == 0);
  CHECK_FALSE(find_pattern_mismatch(arena.regions[1].data(), 5 * 256 * kKiB, 701));
  CHECK_FALSE(find_pattern_mismatch(arena.regions[1].data() + 6 * 256 * kKiB, 2 * 256 * kKiB, 701, 6 * 256 * kKiB / 8));
}

TEST_CASE("a snapshot that does not fit the arena is refused naming the field, changing nothing") {
  TestArena arena("hp-spill-shape", {2 * kMiB, 2 * kMiB});
  test::TempDir disk(test::kDiskDir);
  arena.fill(9);
  SnapshotOptions options = arena.snapshot_options();
  options.plan = "{\"tp\":2}";
  save_snapshot(real_os(), "hp-spill-shape", disk.path(), options);

  TestArena bigger("hp-spill-shape", {2 * kMiB, 4 * kMiB});
  bigger.fill(10);
  CHECK_THROWS_WITH_AS(load_snapshot(real_os(), "hp-spill-shape", disk.path(), bigger.snapshot_options()),
                       doctest::Contains("field 'bytes' of rank 1 is 2097152 in the snapshot, 4194304 in the arena"), Error);
  CHECK(bigger.holds(10));
  TestArena fewer("hp-spill-shape", {2 * kMiB});
  CHECK_THROWS_WITH_AS(load_snapshot(real_os(), "hp-spill-shape", disk.path(), fewer.snapshot_options()),
                       doctest::Contains("field 'ranks' is [0,1] in the snapshot, [0] in the arena"), Error);

  arena.fill(11);
  CHECK_THROWS_WITH_AS(load_snapshot(real_os(), "hp-spill-shape", disk.path(), arena.snapshot_options(kMiB)),
                       doctest::Contains("field 'chunk_bytes' of rank 0 is 262144 in the snapshot, 1048576 asked"), Error);
  SnapshotOptions other_plan = arena.snapshot_options();
  other_plan.plan = "{\"tp\":4}";
  CHECK_THROWS_WITH_AS(load_snapshot(real_os(), "hp-spill-shape", disk.path(), other_plan), doctest::Contains("field 'plan' differs"),
                       Error);
  CHECK(arena.holds(11));
  load_snapshot(real_os(), "hp-spill-shape", disk.path(), options);  // the same plan
  CHECK(arena.holds(9));
  load_snapshot(real_os(), "hp-spill-shape", disk.path(), arena.snapshot_options());  // no plan known here: not compared
  CHECK(arena.holds(9));

  const std::string manifest = disk.path() + "/manifest.json";
  const std::string good = test::file_text(manifest);
  auto refused_with = [&](const std::string& from, const std::string& to, const std::string& expected) {
    std::string text = good;
    REQUIRE(text.find(from) != std::string::npos);
    write_text(manifest, text.replace(text.find(from), from.size(), to));
    CHECK_THROWS_WITH_AS(load_snapshot(real_os(), "hp-spill-shape", disk.path(), arena.snapshot_options()),
                         doctest::Contains(expected.c_str()), Error);
  };
  refused_with("\"layout_version\": 1", "\"layout_version\": 2", "field 'layout_version' is 2; this hugepin reads 1");
  refused_with("data-1/rank-1.data", "../../etc/passwd", "field 'file' is '../../etc/passwd'");
  refused_with("\"chunks\": 8", "\"chunks\": 9", "field 'chunks' is 9");
  refused_with("\"format\"", "\"formats\"", "not a hugepin snapshot manifest");
  CHECK(arena.holds(9));
  std::filesystem::remove(manifest);
  CHECK_THROWS_WITH_AS(load_snapshot(real_os(), "hp-spill-shape", disk.path(), arena.snapshot_options()),
                       doctest::Contains("holds no snapshot (no manifest.json)"), Error);
  CHECK_THROWS_WITH_AS(load_snapshot(real_os(), "no-such", disk.path(), arena.snapshot_options()),
                       doctest::Contains("no arena named 'no-such'"), Error);
}

TEST_CASE("a save or load is refused while another save holds the directory") {
  TestArena arena("hp-spill-locked", {kMiB});
  test::TempDir disk(test::kDiskDir);
  save_snapshot(real_os(), "hp-spill-locked", disk.path(), arena.snapshot_options());
  int fd = ::open((disk.path() + "/.lock").c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);
  // flock locks belong to the open file: the library's own open of .lock conflicts with this one.
  CHECK_THROWS_WITH_AS(save_snapshot(real_os(), "hp-spill-locked", disk.path(), arena.snapshot_options()),
                       doctest::Contains("is locked"), Error);
  CHECK_THROWS_WITH_AS(load_snapshot(real_os(), "hp-spill-locked", disk.path(), arena.snapshot_options()),
                       doctest::Contains("is locked"), Error);
  ::close(fd);
  load_snapshot(real_os(), "hp-spill-locked", disk.path(), arena.snapshot_options());
}

TEST_CASE("a save killed at any step leaves the previous snapshot whole; the next save cleans up") {
  TestArena arena("hp-spill-crash", {kMiB + 4 * kKiB, kMiB});
  test::TempDir disk(test::kDiskDir);
  const std::string dir = disk.path();
  const std::vector<std::string> steps{"progress-1", "progress-2", "data-written", "data-renamed",
                                       "manifest-written", "committed", "cleaned"};
  uint64_t generation = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    CAPTURE(steps[k]);
    arena.fill(20);
    generation = save_snapshot(real_os(), "hp-spill-crash", dir, arena.snapshot_options()).generation;
    CHECK(names_in(dir) == std::set<std::string>{".lock", "data-" + std::to_string(generation), "manifest.json"});

    int ended = test::run_in_child([&] {
      arena.fill(21);
      SnapshotOptions options = arena.snapshot_options();
      int progress_calls = 0;
      options.progress = [&](uint64_t, uint64_t) {
        if (steps[k] == "progress-" + std::to_string(++progress_calls)) ::raise(SIGKILL);
      };
      options.on_step = [&](std::string_view step) {
        if (steps[k] == step) ::raise(SIGKILL);
      };
      save_snapshot(real_os(), "hp-spill-crash", dir, options);
      return true;
    });
    REQUIRE(ended == -SIGKILL);
    const bool committed = steps[k] == "committed" || steps[k] == "cleaned";
    arena.fill(22);
    SnapshotReport loaded = load_snapshot(real_os(), "hp-spill-crash", dir, arena.snapshot_options());
    CHECK(loaded.generation == generation + (committed ? 1 : 0));
    CHECK(arena.holds(committed ? 21 : 20));
  }
}

TEST_CASE("saves killed at random times leave one whole snapshot, old or new (fixed seed)") {
  TestArena arena("hp-spill-random", {24 * kMiB, 24 * kMiB});
  test::TempDir disk(test::kDiskDir);
  const std::string dir = disk.path();
  arena.fill(30);
  auto start = std::chrono::steady_clock::now();
  save_snapshot(real_os(), "hp-spill-random", dir, arena.snapshot_options());
  const auto save_us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
  std::mt19937_64 random(20261129);
  for (int round = 0; round < 8; ++round) {
    CAPTURE(round);
    arena.fill(30);
    save_snapshot(real_os(), "hp-spill-random", dir, arena.snapshot_options());
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      int code = 0;
      try {
        arena.fill(31);
        save_snapshot(real_os(), "hp-spill-random", dir, arena.snapshot_options());
      } catch (...) {
        code = 1;
      }
      _exit(code);
    }
    const auto delay = std::chrono::microseconds(static_cast<int64_t>(random() % static_cast<uint64_t>(2 * save_us + 1)));
    std::this_thread::sleep_for(delay);
    ::kill(child, SIGKILL);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK((WIFSIGNALED(status) || WEXITSTATUS(status) == 0));
    arena.fill(32);
    load_snapshot(real_os(), "hp-spill-random", dir, arena.snapshot_options());
    CHECK((arena.holds(30) || arena.holds(31)));
  }
  arena.fill(33);
  SnapshotReport last = save_snapshot(real_os(), "hp-spill-random", dir, arena.snapshot_options());
  CHECK(names_in(dir) == std::set<std::string>{".lock", "data-" + std::to_string(last.generation), "manifest.json"});
}

}  // namespace hugepin
