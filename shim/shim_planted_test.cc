// The shim against what another local user plants, and against a rank that holds KV (issue 20,
// items 1, 2 and 9). A root process (the tests run as root) names an arena with HUGEPIN_ARENA;
// uid 65534 (nobody) plants the files under a data directory made as systemd-tmpfiles once made
// /dev/shm/hugepin: writable by all, sticky. Every case must fall through to CUDA, touching
// nothing it was not meant to.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <string>

#include "base/error.h"
#include "base/size.h"
#include "hugemem/naming.h"
#include "ipc/test_arena.h"
#include "shim/shim.h"
#include "tests/support/run_as_nobody.h"
#include "tests/support/temp_dir.h"

namespace hugepin {
namespace {

// A stand-in for CUDA: every registration succeeds.
class AcceptingPin final : public PinApi {
 public:
  shim_table::Api kind() const override { return shim_table::Api::kRuntime; }
  int register_memory(void*, uint64_t) override { return 0; }
  int unregister_memory(void*) override { return 0; }
  int current_gpu(std::string* pci_address) override {
    *pci_address = "0000:00:02.0";  // no NUMA affinity in the recorded tree
    return 0;
  }
  std::string describe(const char* call, int code) override { return cat(call, " failed: fake error ", code); }
  void clear_error() override {}
  int not_registered_code() const override { return 713; }
};

struct Fixture {
  test::TempDir shm{"/dev/shm"};
  std::unique_ptr<Os> tree = make_rooted_os(test::test_data_path("sysfs/two-node"));
  AcceptingPin pin;

  Fixture() {
    // The data directory as tmpfiles shipped it before: anyone may make an arena directory in it.
    const std::string top = shm.path() + "/" + std::string(kDataDirName);
    REQUIRE(mkdir(top.c_str(), 0755) == 0);
    REQUIRE(chmod(top.c_str(), 01777) == 0);
    REQUIRE(chmod(shm.path().c_str(), 0755) == 0);  // nobody must reach it
  }
  ShimConfig config(const std::string& arena) const {
    ShimConfig config;
    config.min_bytes = kMiB;
    config.arena = arena;
    config.shm_dir = shm.path();
    config.rank_source = "test";
    return config;
  }
  // What the shim serves for one request in a child that must finish within `seconds`: a FIFO
  // that blocked an open would otherwise hang the test runner. 1: served, 0: fell through,
  // -1: killed (hung, or crashed).
  int served_in_child(const std::string& arena) const {
    std::fflush(nullptr);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      alarm(30);
      AcceptingPin child_pin;
      Shim shim(*tree, config(arena));
      _exit(shim.serve("cudaHostAlloc", kMiB, 0, child_pin) != nullptr ? 1 : 0);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_text(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  REQUIRE(chmod(path.c_str(), mode) == 0);
}

}  // namespace

TEST_CASE("a region another user planted is never mapped: a link to root's file, their own file, a linked directory") {
  Fixture f;
  const std::string top = f.shm.path() + "/hugepin";
  const std::string root_file = f.shm.path() + "/root-only";
  const std::string data(4 * kMiB, 'r');
  write_text(root_file, data, 0600);

  // A link where rank 0's region would be, to a file only root may write.
  REQUIRE(test::run_as_nobody([&] {
            return mkdir((top + "/a1").c_str(), 0755) == 0 && symlink(root_file.c_str(), (top + "/a1/rank-0").c_str()) == 0;
          }) == 0);
  {
    Shim shim(*f.tree, f.config("a1"));
    CHECK(shim.serve("cudaHostAlloc", kMiB, 0, f.pin) == nullptr);
  }
  CHECK(file_text(root_file) == data);

  // Their own file, open to all: what root's process wrote would be theirs to read.
  REQUIRE(test::run_as_nobody([&] {
            if (unlink((top + "/a1/rank-0").c_str()) != 0) return false;
            std::ofstream(top + "/a1/rank-0") << std::string(4 * kMiB, '\0');
            return chmod((top + "/a1/rank-0").c_str(), 0666) == 0;
          }) == 0);
  {
    Shim shim(*f.tree, f.config("a1"));
    CHECK(shim.serve("cudaHostAlloc", kMiB, 0, f.pin) == nullptr);
  }

  // A link in place of the arena's directory, to a root directory holding a rank-0.
  const std::string root_dir = f.shm.path() + "/root-dir";
  REQUIRE(mkdir(root_dir.c_str(), 0700) == 0);
  write_text(root_dir + "/rank-0", data, 0600);
  REQUIRE(test::run_as_nobody([&] { return symlink(root_dir.c_str(), (top + "/a2").c_str()) == 0; }) == 0);
  {
    Shim shim(*f.tree, f.config("a2"));
    CHECK(shim.serve("cudaHostAlloc", kMiB, 0, f.pin) == nullptr);
  }
  CHECK(file_text(root_dir + "/rank-0") == data);
}

TEST_CASE("a FIFO planted as an arena's control segment or region makes the shim fall through, never hang") {
  Fixture f;
  const std::string top = f.shm.path() + "/hugepin";
  // As rank 0 of an arena.
  REQUIRE(test::run_as_nobody([&] {
            return mkdir((top + "/f1").c_str(), 0755) == 0 && mkfifo((top + "/f1/rank-0").c_str(), 0666) == 0;
          }) == 0);
  CHECK(f.served_in_child("f1") == 0);
  // As the control segment of an arena in /dev/shm (sticky, writable by all).
  const std::string name = cat("t", getpid(), "-fifo");
  const std::string segment = control_segment_path(name);
  REQUIRE(test::run_as_nobody([&] { return mkfifo(segment.c_str(), 0666) == 0; }) == 0);
  CHECK(f.served_in_child(name) == 0);
  unlink(segment.c_str());
}

// Issue 20, item 9: a process under the shim attached to a --keep demo arena overwrote stored KV.
TEST_CASE("a rank a worker has attached to holds KV: the shim falls through instead of carving it") {
  test::TestArena arena("shim-kv", test::small_layout(1, 1, 4, 64 * kKiB));
  {
    RankAttachment worker = test::attach_rank(arena, 0, 0);
    std::memset(worker.region().data(), 0x5a, worker.region().size());
    worker.detach();
  }
  ShimConfig config;
  config.min_bytes = 4096;
  config.arena = arena.name();
  config.shm_dir = arena.dir();
  config.rank_source = "test";
  AcceptingPin pin;
  std::unique_ptr<Os> tree = make_rooted_os(test::test_data_path("sysfs/two-node"));
  Shim shim(*tree, config);
  CHECK(shim.serve("cudaHostAlloc", 64 * kKiB, 0, pin) == nullptr);
  const std::string region = file_text(arena.created().data.regions[0].path);
  CHECK(region == std::string(region.size(), '\x5a'));

  // An arena no worker ever attached to is the shim's to carve.
  test::TestArena fresh("shim-fresh", test::small_layout(1, 1, 4, 64 * kKiB));
  config.arena = fresh.name();
  config.shm_dir = fresh.dir();
  Shim fresh_shim(*tree, config);
  void* memory = fresh_shim.serve("cudaHostAlloc", 64 * kKiB, 0, pin);
  CHECK(memory != nullptr);
  fresh_shim.release(memory);
}

}  // namespace hugepin
