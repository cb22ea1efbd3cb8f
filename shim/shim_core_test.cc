// The shim's policy in one process, with a stand-in for CUDA (no LD_PRELOAD): what is served, what
// falls through (planted files and ranks that hold KV included), what is given back.
#include "shim/shim.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <atomic>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "base/error.h"
#include "base/size.h"
#include "hugemem/arena.h"
#include "hugemem/naming.h"
#include "ipc/test_arena.h"
#include "shim/shim_registry.h"
#include "tests/support/child_process.h"
#include "tests/support/fault_os.h"
#include "tests/support/temp_dir.h"

namespace hugepin {
namespace {

// Registrations as a set; fails the registration numbers a test chooses. Thread-safe.
class FakePin final : public PinApi {
 public:
  shim_table::Api kind() const override { return shim_table::Api::kRuntime; }
  int register_memory(void* address, uint64_t bytes) override {
    std::lock_guard lock(mutex);
    if (fail_next_registers > 0) {
      --fail_next_registers;
      return 2;
    }
    for (const auto& [start, size] : registered) {
      auto* a = static_cast<char*>(address);
      auto* b = static_cast<char*>(start);
      if (a < b + size && b < a + bytes) return 712;  // overlap: the shim handed out bytes twice
    }
    registered[address] = bytes;
    return 0;
  }
  int unregister_memory(void* address) override {
    std::lock_guard lock(mutex);
    return registered.erase(address) == 1 ? 0 : 713;
  }
  int current_gpu(std::string* pci_address) override {
    if (gpu_error != 0) return gpu_error;
    *pci_address = gpu;
    return 0;
  }
  std::string describe(const char* call, int code) override { return cat(call, " failed: fake error ", code); }
  void clear_error() override { ++cleared; }
  int not_registered_code() const override { return 713; }

  std::mutex mutex;
  std::map<void*, uint64_t> registered;
  int fail_next_registers = 0;
  int gpu_error = 0;
  std::string gpu = "0000:00:02.0";  // no NUMA affinity in the recorded two-node tree
  int cleared = 0;
};

struct Fixture {
  test::TempDir shm{"/dev/shm"};
  std::unique_ptr<Os> tree = make_rooted_os(test::test_data_path("sysfs/two-node"));
  FakePin pin;

  ShimConfig config(const std::string& arena) const {
    ShimConfig config;
    config.min_bytes = kMiB;
    config.arena = arena;
    config.shm_dir = shm.path();
    config.rank_source = "test";
    return config;
  }
  void make_arena(const std::string& name, uint64_t bytes) const {
    ArenaOptions options;
    options.page_size = 4096;
    options.shm_dir = shm.path();
    options.prefault_threads = 1;
    create_arena(real_os(), name, {{0, bytes, -1}}, options);
  }
  std::vector<ShimAllocation> table() const {
    return read_shim_table(real_os(), cat(shm.path(), "/", shim_table::kFilePrefix, getpid())).allocations;
  }
};

}  // namespace

TEST_CASE("an arena allocation is registered, tracked, listed and given back") {
  Fixture f;
  f.make_arena("kv", 16 * kMiB);
  Shim shim(*f.tree, f.config("kv"));
  void* memory = shim.serve("cudaHostAlloc", 3 * kMiB + 1, 2, f.pin);
  REQUIRE(memory != nullptr);
  CHECK(f.pin.registered.at(memory) == 3 * kMiB + 4096);
  CHECK(shim.holds(static_cast<char*>(memory) + 3 * kMiB));
  CHECK_FALSE(shim.holds(static_cast<char*>(memory) + 3 * kMiB + 4096));
  CHECK(shim.flags_of(memory) == 2u);
  REQUIRE(f.table().size() == 1);
  CHECK(f.table()[0].bytes_asked == 3 * kMiB + 1);
  CHECK(f.table()[0].arena == "kv");

  Shim::ReleaseResult released = shim.release(memory);
  CHECK(released.freed == Shim::Freed::kReleased);
  CHECK(released.code == 0);
  CHECK(f.pin.registered.empty());
  CHECK(f.table().empty());
  CHECK(shim.release(memory).freed == Shim::Freed::kFreedBefore);
  int foreign = 0;
  CHECK(shim.release(&foreign).freed == Shim::Freed::kNotOurs);
  // The extent went back: the whole region can be had again.
  void* whole = shim.serve("cudaHostAlloc", 16 * kMiB, 0, f.pin);
  CHECK(whole == memory);
  shim.note_cuda_allocation(memory);  // no longer a freed address...
  CHECK(shim.release(whole).freed == Shim::Freed::kReleased);
}

TEST_CASE("an address CUDA hands out again is no longer a double free") {
  Fixture f;
  f.make_arena("kv", 8 * kMiB);
  Shim shim(*f.tree, f.config("kv"));
  void* memory = shim.serve("cudaHostAlloc", 2 * kMiB, 0, f.pin);
  REQUIRE(memory != nullptr);
  shim.release(memory);
  shim.note_cuda_allocation(memory);
  CHECK(shim.release(memory).freed == Shim::Freed::kNotOurs);
}

TEST_CASE("a refused registration gives the extent back and clears the error it left") {
  Fixture f;
  f.make_arena("kv", 4 * kMiB);
  Shim shim(*f.tree, f.config("kv"));
  f.pin.fail_next_registers = 1;
  CHECK(shim.serve("cudaHostAlloc", 4 * kMiB, 0, f.pin) == nullptr);
  CHECK(f.pin.cleared == 1);
  CHECK(shim.live_allocations() == 0);
  CHECK(shim.serve("cudaHostAlloc", 4 * kMiB, 0, f.pin) != nullptr);  // the whole region is still free
}

TEST_CASE("a missing arena, a full region and a missing GPU fall through or serve as documented") {
  Fixture f;
  {
    Shim shim(*f.tree, f.config("absent"));
    CHECK(shim.serve("cudaHostAlloc", 2 * kMiB, 0, f.pin) == nullptr);
  }
  f.make_arena("kv", 4 * kMiB);
  Shim shim(*f.tree, f.config("kv"));
  void* first = shim.serve("cudaHostAlloc", 3 * kMiB, 0, f.pin);
  CHECK(first != nullptr);
  CHECK(shim.serve("cudaHostAlloc", 2 * kMiB, 0, f.pin) == nullptr);
  CHECK(f.pin.registered.size() == 1);
  // No current GPU: served, unbound (not strict).
  f.pin.gpu_error = 100;
  void* second = shim.serve("cudaHostAlloc", kMiB, 0, f.pin);
  CHECK(second != nullptr);
  shim.release(first);
  shim.release(second);

  ShimConfig strict = f.config("kv");
  strict.strict = true;
  Shim strict_shim(*f.tree, strict);
  CHECK(strict_shim.serve("cudaHostAlloc", kMiB, 0, f.pin) == nullptr);  // no GPU known
}

// Refuses the region's lock (EAGAIN, as when another process maps the rank) `refusals` times.
class ContendedLockOs final : public test::ForwardingOs {
 public:
  ContendedLockOs(Os& target, int refusals) : ForwardingOs(target), refusals_(refusals) {}
  int fcntl_lock(int fd, int command, struct flock* lock) override {
    if (command == F_OFD_SETLK) {
      ++attempts;
      if (refusals_ > 0) {
        --refusals_;
        return -EAGAIN;
      }
    }
    return ForwardingOs::fcntl_lock(fd, command, lock);
  }
  int attempts = 0;

 private:
  int refusals_;
};

TEST_CASE("a rank whose region another process holds falls through; the next request tries again") {
  Fixture f;
  f.make_arena("kv", 4 * kMiB);
  ContendedLockOs held(*f.tree, 1);
  Shim shim(held, f.config("kv"));
  CHECK(shim.serve("cudaHostAlloc", kMiB, 0, f.pin) == nullptr);  // refused: CUDA serves it
  CHECK(held.attempts == 1);
  void* memory = shim.serve("cudaHostAlloc", kMiB, 0, f.pin);  // the holder is gone
  CHECK(memory != nullptr);
  CHECK(held.attempts == 2);
  shim.release(memory);
}

// Makes arena `name`'s control segment and holds it exclusively, as hugepind's retention does
// while it destroys (ipc/arena_lock.h); returns the descriptor that holds the lock.
int hold_segment(const std::string& name) {
  const int held = open(control_segment_path(name).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  REQUIRE(held >= 0);
  REQUIRE(flock(held, LOCK_EX) == 0);
  return held;
}

// Counts flock calls (the shim's claim on the arena's control segment).
class CountingFlockOs final : public test::ForwardingOs {
 public:
  using ForwardingOs::ForwardingOs;
  int flock(int fd, int operation) override {
    calls.fetch_add(1);
    return ForwardingOs::flock(fd, operation);
  }
  std::atomic<int> calls{0};
};

TEST_CASE("a shim opening its region waits out a destroy in progress, then falls through: the arena is gone") {
  Fixture f;
  const std::string name = cat("t", getpid(), "-shim-gone");
  f.make_arena(name, 4 * kMiB);
  const std::string segment = control_segment_path(name);
  const int held = hold_segment(name);
  CountingFlockOs os(*f.tree);
  Shim shim(os, f.config(name));
  void* during = &shim;  // not null: set by the thread
  std::thread opener([&] { during = shim.serve("cudaHostAlloc", kMiB, 0, f.pin); });
  for (int i = 0; i < 5000 && os.calls.load() == 0; ++i) usleep(1000);
  CHECK(os.calls.load() > 0);  // the shim is waiting on the segment
  unlink(segment.c_str());     // the destroy ends: segment gone, then the lock
  close(held);
  opener.join();
  CHECK(during == nullptr);  // it fell through instead of mapping a destroyed arena
  // The next request finds no segment: an arena without one has no retention to race.
  void* after = shim.serve("cudaHostAlloc", kMiB, 0, f.pin);
  CHECK(after != nullptr);
  shim.release(after);
}

// A control segment some process holds exclusively and never lets go of while the test says so;
// every refused try of the shim's claim costs a second of the test's clock, not of real time.
class StuckHolderOs final : public test::ManualClockOs {
 public:
  using ManualClockOs::ManualClockOs;
  int flock(int fd, int operation) override {
    ++calls;
    const int rc = ManualClockOs::flock(fd, operation);
    if (rc == -EWOULDBLOCK) advance(1'000'000'000);
    return rc;
  }
  int calls = 0;
};

TEST_CASE("after a claim times out on a stuck holder, requests fall through at once until the shim's clock says retry") {
  Fixture f;
  const std::string name = cat("t", getpid(), "-shim-stuck");
  f.make_arena(name, 4 * kMiB);
  const std::string segment = control_segment_path(name);
  const int held = hold_segment(name);
  StuckHolderOs os(*f.tree);
  Shim shim(os, f.config(name));
  CHECK(shim.serve("cudaHostAlloc", kMiB, 0, f.pin) == nullptr);  // the claim's wait ran out
  const int tries = os.calls;
  CHECK(tries > 1);
  unlink(segment.c_str());  // the holder is gone ...
  close(held);
  CHECK(shim.serve("cudaHostAlloc", kMiB, 0, f.pin) == nullptr);  // ... but the shim does not look yet
  CHECK(os.calls == tries);
  os.advance(31'000'000'000);  // past the shim's 30 s of falling through
  void* memory = shim.serve("cudaHostAlloc", kMiB, 0, f.pin);
  CHECK(memory != nullptr);
  shim.release(memory);
}

// Fails opening one file (by its name in its directory) with one errno.
class RefusingPathOs final : public test::ForwardingOs {
 public:
  RefusingPathOs(Os& target, const std::string& path, int error)
      : ForwardingOs(target), name_(path.substr(path.rfind('/') + 1)), error_(error) {}
  int openat(int dir_fd, const std::string& name, int flags, mode_t mode) override {
    return name == name_ ? -error_ : ForwardingOs::openat(dir_fd, name, flags, mode);
  }

 private:
  std::string name_;
  int error_;
};

TEST_CASE("a control segment the shim cannot open or lock: it falls through, and a stuck lock only once") {
  Fixture f;
  const std::string name = cat("t", getpid(), "-shim-claim");
  f.make_arena(name, 4 * kMiB);
  const std::string segment = control_segment_path(name);
  {
    RefusingPathOs os(*f.tree, segment, EACCES);  // exists, not ours to read: no claim, no arena
    Shim shim(os, f.config(name));
    CHECK(shim.serve("cudaHostAlloc", kMiB, 0, f.pin) == nullptr);
  }
  const int held = hold_segment(name);  // for good, by someone
  CountingFlockOs os(*f.tree);
  Shim shim(os, f.config(name));
  CHECK(shim.serve("cudaHostAlloc", kMiB, 0, f.pin) == nullptr);  // after the claim's 2 s wait
  const int tries = os.calls.load();
  CHECK(tries > 0);
  CHECK(shim.serve("cudaHostAlloc", kMiB, 0, f.pin) == nullptr);  // at once: remembered
  CHECK(os.calls.load() == tries);
  close(held);
  unlink(segment.c_str());
}

TEST_CASE("the GPU's node is looked up once per PCI address") {
  Fixture f;
  f.make_arena("kv", 8 * kMiB);
  Shim shim(*f.tree, f.config("kv"));
  f.pin.gpu = "0000:17:00.0";  // node 0 in the tree: where this machine's pages are
  void* memory = shim.serve("cudaHostAlloc", 2 * kMiB, 0, f.pin);
  REQUIRE(memory != nullptr);
  CHECK(f.table()[0].node == 0);
  shim.release(memory);
}

TEST_CASE("a private mapping with no hugetlbfs mount falls through and leaves nothing") {
  Fixture f;
  ShimConfig config = f.config("");
  config.hugetlbfs_dir = f.shm.path();  // tmpfs, not hugetlbfs
  Shim shim(*f.tree, config);
  CHECK(shim.serve("cudaHostAlloc", 2 * kMiB, 0, f.pin) == nullptr);
  CHECK(f.pin.registered.empty());
  CHECK(f.table().empty());
}

TEST_CASE("requests too large for any host fall through") {
  Fixture f;
  f.make_arena("kv", 4 * kMiB);
  Shim shim(*f.tree, f.config("kv"));
  CHECK(shim.serve("cudaHostAlloc", Shim::kMaxRequest + 1, 0, f.pin) == nullptr);
  CHECK(shim.serve("cudaHostAlloc", UINT64_MAX, 0, f.pin) == nullptr);
}

TEST_CASE("threads serving and freeing at once never share bytes, and everything comes back") {
  Fixture f;
  f.make_arena("kv", 64 * kMiB);
  Shim shim(*f.tree, f.config("kv"));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(99 + t);
      std::vector<std::pair<unsigned char*, uint64_t>> mine;
      for (int i = 0; i < 200; ++i) {
        if (!mine.empty() && random() % 2 == 0) {
          auto [memory, bytes] = mine.back();
          mine.pop_back();
          for (uint64_t at = 0; at < bytes; at += 4096) CHECK(memory[at] == static_cast<unsigned char>(t));
          CHECK(shim.release(memory).freed == Shim::Freed::kReleased);
          continue;
        }
        uint64_t bytes = kMiB + random() % (3 * kMiB);
        auto* memory = static_cast<unsigned char*>(shim.serve("cudaHostAlloc", bytes, 0, f.pin));
        if (memory == nullptr) continue;  // the region is full for now
        for (uint64_t at = 0; at < bytes; at += 4096) memory[at] = static_cast<unsigned char>(t);
        mine.emplace_back(memory, bytes);
      }
      for (auto [memory, bytes] : mine) CHECK(shim.release(memory).freed == Shim::Freed::kReleased);
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(shim.live_allocations() == 0);
  CHECK(f.pin.registered.empty());
  CHECK(f.table().empty());
  CHECK(shim.serve("cudaHostAlloc", 64 * kMiB, 0, f.pin) != nullptr);  // every extent came back
}

// --- what another local user plants, and a rank that holds KV (issue 20, items 1, 2 and 9) ---
//
// A root process (the tests run as root) names an arena with HUGEPIN_ARENA; uid 65534 (nobody)
// plants the files under a data directory made as systemd-tmpfiles once made /dev/shm/hugepin:
// writable by all, sticky. Every case must fall through to CUDA, touching nothing.

namespace {

// The fixture's shm dir opened to nobody, its hugepin directory to everyone; returns the latter.
std::string open_data_dir_to_all(const Fixture& f) {
  const std::string top = f.shm.path() + "/" + std::string(kDataDirName);
  REQUIRE(chmod(f.shm.path().c_str(), 0755) == 0);
  REQUIRE(mkdir(top.c_str(), 0755) == 0);
  REQUIRE(chmod(top.c_str(), 01777) == 0);
  return top;
}

// Whether one request for arena `arena` is served, asked in a child that gets 30 s: a FIFO that
// blocked an open would otherwise hang the runner. 1: served, 0: fell through, -1: killed.
int served_in_child(const Fixture& f, const std::string& arena) {
  // The child exits 0 when the request falls through, 1 when it is served.
  const int status = test::run_in_child([&] {
    alarm(30);
    FakePin pin;
    Shim shim(*f.tree, f.config(arena));
    return shim.serve("cudaHostAlloc", kMiB, 0, pin) == nullptr;
  });
  return status == 0 || status == 1 ? status : -1;
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_private(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  REQUIRE(chmod(path.c_str(), 0600) == 0);
}

}  // namespace

TEST_CASE("a region another user planted is never mapped: a link to root's file, their own file, a linked directory") {
  Fixture f;
  const std::string top = open_data_dir_to_all(f);
  const std::string root_file = f.shm.path() + "/root-only";
  const std::string data(4 * kMiB, 'r');
  write_private(root_file, data);

  // A link where rank 0's region would be, to a file only root may write.
  REQUIRE(test::run_as_nobody([&] {
            return mkdir((top + "/a1").c_str(), 0755) == 0 && symlink(root_file.c_str(), (top + "/a1/rank-0").c_str()) == 0;
          }) == 0);
  CHECK(served_in_child(f, "a1") == 0);
  CHECK(file_text(root_file) == data);

  // Their own file, open to all: what root's process wrote would be theirs to read.
  REQUIRE(test::run_as_nobody([&] {
            if (unlink((top + "/a1/rank-0").c_str()) != 0) return false;
            std::ofstream(top + "/a1/rank-0") << std::string(4 * kMiB, '\0');
            return chmod((top + "/a1/rank-0").c_str(), 0666) == 0;
          }) == 0);
  CHECK(served_in_child(f, "a1") == 0);

  // A link in place of the arena's directory, to a root directory holding a rank-0.
  const std::string root_dir = f.shm.path() + "/root-dir";
  REQUIRE(mkdir(root_dir.c_str(), 0700) == 0);
  write_private(root_dir + "/rank-0", data);
  REQUIRE(test::run_as_nobody([&] { return symlink(root_dir.c_str(), (top + "/a2").c_str()) == 0; }) == 0);
  CHECK(served_in_child(f, "a2") == 0);
  CHECK(file_text(root_dir + "/rank-0") == data);
}

TEST_CASE("a FIFO planted as an arena's control segment or region makes the shim fall through, never hang") {
  Fixture f;
  const std::string top = open_data_dir_to_all(f);
  REQUIRE(test::run_as_nobody([&] {
            return mkdir((top + "/f1").c_str(), 0755) == 0 && mkfifo((top + "/f1/rank-0").c_str(), 0666) == 0;
          }) == 0);
  CHECK(served_in_child(f, "f1") == 0);
  // As the control segment of an arena in /dev/shm (sticky, writable by all).
  const std::string name = cat("t", getpid(), "-fifo");
  const std::string segment = control_segment_path(name);
  REQUIRE(test::run_as_nobody([&] { return mkfifo(segment.c_str(), 0666) == 0; }) == 0);
  CHECK(served_in_child(f, name) == 0);
  unlink(segment.c_str());
}

// Issue 20, item 9: a process under the shim attached to a --keep demo arena overwrote stored KV.
TEST_CASE("a rank a worker has attached to holds KV: the shim falls through instead of carving it") {
  Fixture f;
  test::TestArena arena("shim-kv", test::small_layout(1, 1, 4, 64 * kKiB));
  {
    RankAttachment worker = test::attach_rank(arena, 0, 0);
    std::memset(worker.region().data(), 0x5a, worker.region().size());
    worker.detach();
  }
  ShimConfig config = f.config(arena.name());
  config.min_bytes = 4096;
  config.shm_dir = arena.dir();
  Shim shim(*f.tree, config);
  CHECK(shim.serve("cudaHostAlloc", 64 * kKiB, 0, f.pin) == nullptr);
  const std::string region = file_text(arena.created().data.regions[0].path);
  CHECK(region == std::string(region.size(), '\x5a'));

  // An arena no worker ever attached to is the shim's to carve.
  test::TestArena fresh("shim-fresh", test::small_layout(1, 1, 4, 64 * kKiB));
  config.arena = fresh.name();
  config.shm_dir = fresh.dir();
  Shim fresh_shim(*f.tree, config);
  void* memory = fresh_shim.serve("cudaHostAlloc", 64 * kKiB, 0, f.pin);
  CHECK(memory != nullptr);
  fresh_shim.release(memory);
}

}  // namespace hugepin
