// The shim in real processes: programs linked against the fake CUDA runtime and driver (this
// folder), run with LD_PRELOAD=libhugepin_preload.so. Arenas live on 4 KiB shared memory in a
// private directory, so nothing here needs hugepages, root or a GPU.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <fstream>
#include <set>
#include <sstream>

#include "base/error.h"
#include "base/size.h"
#include "ipc/test_arena.h"
#include "shim/testing/shim_test_support.h"

namespace hugepin {
namespace {

using test::ShimEnvironment;
using test::ShimRun;

bool has_table(const ShimEnvironment& env) {
  for (const auto& entry : std::filesystem::directory_iterator(env.shm_dir())) {
    if (entry.path().filename().string().rfind("hugepin-shim-table.", 0) == 0) return true;
  }
  return false;
}

// A copy of the recorded two-node tree whose pool has no free pages left.
void empty_pool_tree(const std::string& dir) {
  test::copy_test_tree("sysfs/two-node", dir);
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.path().filename() == "free_hugepages") std::ofstream(entry.path()) << "0\n";
  }
}

// A copy of the recorded two-node tree whose hugetlbfs mounts are directories this machine lacks.
void missing_mount_tree(const std::string& dir) {
  test::copy_test_tree("sysfs/two-node", dir);
  std::ofstream(dir + "/proc/mounts") << "hugetlbfs /nonexistent/hugepin-2m hugetlbfs rw,relatime,pagesize=2M 0 0\n";
}

}  // namespace

TEST_CASE("requests below the threshold go to CUDA, larger ones to the arena region, exactly sized") {
  ShimEnvironment env;
  test::create_shm_arena(env.shm_dir(), "kv", 0, 64 * kMiB);
  ShimRun run = env.run("HUGEPIN_ARENA=kv PROBE_PAGE=4096",
                        test::probe13() + " alloc 512K:cuda 3M:shim 1M:shim 5000001:shim 1048575:cuda");
  CHECK_MESSAGE(run.status == 0, describe(run));
  CHECK_MESSAGE(run.warnings() == 0, describe(run));
  CHECK(run.says("ok: alloc"));
}

TEST_CASE("the calls around a shim allocation answer as they do for cudaHostAlloc memory") {
  ShimEnvironment env;
  test::create_shm_arena(env.shm_dir(), "kv", 0, 64 * kMiB);
  ShimRun run = env.run("HUGEPIN_ARENA=kv PROBE_PAGE=4096", test::probe13() + " calls");
  CHECK_MESSAGE(run.status == 0, describe(run));
  CHECK_MESSAGE(run.warnings() == 0, describe(run));
}

TEST_CASE("frees of pointers the shim did not hand out go to CUDA") {
  ShimEnvironment env;
  test::create_shm_arena(env.shm_dir(), "kv", 0, 64 * kMiB);
  ShimRun run = env.run("HUGEPIN_ARENA=kv", test::probe13() + " foreign");
  CHECK_MESSAGE(run.status == 0, describe(run));
  CHECK_MESSAGE(run.warnings() == 0, describe(run));
}

TEST_CASE("a double free gets CUDA's error for an invalid pointer and one warning") {
  ShimEnvironment env;
  test::create_shm_arena(env.shm_dir(), "kv", 0, 64 * kMiB);
  ShimRun run = env.run("HUGEPIN_ARENA=kv", test::probe13() + " double-free");
  CHECK_MESSAGE(run.status == 0, describe(run));
  CHECK_MESSAGE(run.warnings() == 1, describe(run));
  CHECK(run.says("(a double free, or CUDA memory at a reused address)"));
}

TEST_CASE("each failure of the arena path falls to CUDA with one warning line per cause") {
  ShimEnvironment env;
  test::create_shm_arena(env.shm_dir(), "kv", 0, 8 * kMiB);
  test::create_shm_arena(env.shm_dir(), "one", 1, 8 * kMiB);
  struct Case {
    const char* name;
    std::string variables;
    std::string allocations;
    std::string warning;  // what the single warning line says
  };
  test::TempDir empty_tree;
  empty_pool_tree(empty_tree.path() + "/tree");
  test::TempDir plain_dir;
  test::TempDir missing_mount;
  missing_mount_tree(missing_mount.path() + "/tree");
  const std::vector<Case> cases = {
      {"no such arena", "HUGEPIN_ARENA=nosuch", "3M:cuda 3M:cuda", "arena 'nosuch' has no region for rank 0"},
      {"rank without a region", "HUGEPIN_ARENA=kv HUGEPIN_RANK=5", "3M:cuda", "arena 'kv' has no region for rank 5"},
      {"region exhausted", "HUGEPIN_ARENA=kv", "5M:shim 5M:cuda 4M:cuda 3M:shim", "arena 'kv' rank 0 has no free piece of 5.00 MiB"},
      {"registration refused", "HUGEPIN_ARENA=kv FAKE_CUDA_FAIL=cudaHostRegister=2", "3M:cuda 3M:cuda",
       "registering failed: CUDA runtime error 2 (out of memory) for 3.00 MiB of 4K pages"},
      {"registration refused once", "HUGEPIN_ARENA=kv FAKE_CUDA_FAIL=cudaHostRegister=2@1", "3M:cuda 3M:shim",
       "registering failed: CUDA runtime error 2"},
      {"pool empty", "HUGEPIN_SYSROOT=" + empty_tree.path() + "/tree HUGEPIN_PAGESIZE=2M", "3M:cuda 3M:cuda",
       "no hugepages for 3.00 MiB: 2 2M pages needed, 0 free"},
      {"no hugetlbfs mount", "HUGEPIN_HUGETLBFS_DIR=" + plain_dir.path(), "3M:cuda",
       "HUGEPIN_HUGETLBFS_DIR=" + plain_dir.path() + " is not a hugetlbfs mount"},
      {"mount missing on this machine", "HUGEPIN_SYSROOT=" + missing_mount.path() + "/tree", "3M:cuda",
       "cannot create a file in the hugetlbfs mount /nonexistent/hugepin-2m: No such file or directory"},
      {"write-combined", "HUGEPIN_ARENA=kv", "3M:cuda:4 3M:shim:1", "with the write-combined flag goes to CUDA"},
      {"strict and 4 KiB pages", "HUGEPIN_ARENA=kv HUGEPIN_STRICT=1", "3M:cuda", "strict: arena 'kv' rank 0 is on 4 KiB pages"},
      {"bad option value", "HUGEPIN_ARENA=kv HUGEPIN_MIN_BYTES=12Q", "3M:cuda 63M:cuda",
       "HUGEPIN_MIN_BYTES='12Q' is not a size (examples: 64M, 1G, 1048576): using the default 64M"},
      {"bad rank variable", "HUGEPIN_ARENA=one LOCAL_RANK=first RANK=1", "3M:shim",
       "LOCAL_RANK='first' is not a rank from 0 to 65535: ignored"},
      {"GPU of unknown node", "HUGEPIN_ARENA=kv FAKE_CUDA_PCI_BUS_ID=0000:99:00.0", "3M:shim",
       "the NUMA node of GPU 0000:99:00.0 is unknown"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    ShimRun run = env.run(c.variables, test::probe13() + " alloc " + c.allocations);
    CHECK_MESSAGE(run.status == 0, describe(run));
    CHECK_MESSAGE(run.warnings() == 1, describe(run));
    CHECK_MESSAGE(run.says(c.warning), describe(run));
  }
}

TEST_CASE("HUGEPIN_LOG=quiet silences the warnings, not the fallbacks") {
  ShimEnvironment env;
  ShimRun run = env.run("HUGEPIN_ARENA=nosuch HUGEPIN_LOG=quiet", test::probe13() + " alloc 3M:cuda");
  CHECK_MESSAGE(run.status == 0, describe(run));
  CHECK(run.warnings() == 0);
}

TEST_CASE("HUGEPIN_LOG=info says what each allocation got") {
  ShimEnvironment env;
  test::create_shm_arena(env.shm_dir(), "kv", 0, 8 * kMiB);
  ShimRun run = env.run("HUGEPIN_ARENA=kv HUGEPIN_LOG=info", test::probe13() + " alloc 3M:shim");
  CHECK_MESSAGE(run.status == 0, describe(run));
  CHECK_MESSAGE(run.says("cudaHostAlloc(3.00 MiB) served: 3.00 MiB of 4K pages on node 0 from arena 'kv' rank 0"),
                describe(run));
}

TEST_CASE("two processes on one rank: the second one's requests go to CUDA") {
  ShimEnvironment env;
  test::create_shm_arena(env.shm_dir(), "kv", 0, 16 * kMiB);
  test::HeldProcess holder(env.command("HUGEPIN_ARENA=kv", test::probe13() + " hold 3M"));
  REQUIRE(holder.read_line().rfind("table ", 0) == 0);
  ShimRun second = env.run("HUGEPIN_ARENA=kv", test::probe13() + " alloc 3M:cuda");
  CHECK_MESSAGE(second.status == 0, describe(second));
  CHECK_MESSAGE(second.says("arena 'kv' rank 0 is in use by another process"), describe(second));
  CHECK(holder.finish() == 0);
  // Once the holder is gone, the rank is free again.
  ShimRun third = env.run("HUGEPIN_ARENA=kv", test::probe13() + " alloc 3M:shim");
  CHECK_MESSAGE(third.status == 0, describe(third));
}

TEST_CASE("a runtime error the application has not read makes the shim stand aside") {
  ShimEnvironment env;
  test::create_shm_arena(env.shm_dir(), "kv", 0, 16 * kMiB);
  ShimRun run = env.run("HUGEPIN_ARENA=kv", test::probe13() + " pending-error");
  CHECK_MESSAGE(run.status == 0, describe(run));
  CHECK_MESSAGE(run.says("while the thread has CUDA error 1 pending"), describe(run));
}

TEST_CASE("HUGEPIN_DISABLE passes every call through and leaves no trace") {
  ShimEnvironment env;
  test::create_shm_arena(env.shm_dir(), "kv", 0, 16 * kMiB);
  ShimRun run = env.run("HUGEPIN_ARENA=kv HUGEPIN_DISABLE=1", test::probe13() + " alloc 3M:cuda");
  CHECK_MESSAGE(run.status == 0, describe(run));
  CHECK(run.out == "ok: alloc\n");
  CHECK_FALSE(has_table(env));
}

TEST_CASE("a process that makes no CUDA call sees nothing of the shim") {
  ShimEnvironment env;
  ShimRun run = env.run("HUGEPIN_ARENA=kv HUGEPIN_MIN_BYTES=bad", test::probe13() + " idle");
  CHECK(run.status == 0);
  CHECK(run.out == "ok: idle\n");  // options are read at the first call, not at load
  CHECK_FALSE(has_table(env));
}

TEST_CASE("the allocation table goes away when the process exits") {
  ShimEnvironment env;
  test::create_shm_arena(env.shm_dir(), "kv", 0, 16 * kMiB);
  ShimRun run = env.run("HUGEPIN_ARENA=kv", test::probe13() + " alloc 3M:shim");
  CHECK_MESSAGE(run.status == 0, describe(run));
  CHECK_FALSE(has_table(env));
}

TEST_CASE("many threads allocating and freeing at once keep every byte") {
  ShimEnvironment env;
  test::create_shm_arena(env.shm_dir(), "kv", 0, 96 * kMiB);
  ShimRun run = env.run("HUGEPIN_ARENA=kv", test::probe13() + " threads 8");
  CHECK_MESSAGE(run.status == 0, describe(run));
  CHECK(run.says("ok: threads"));
}

TEST_CASE("the driver API is served too, and pinned memory may be freed through either API") {
  ShimEnvironment env;
  test::create_shm_arena(env.shm_dir(), "kv", 0, 32 * kMiB);
  ShimRun run = env.run("HUGEPIN_ARENA=kv PROBE_PAGE=4096", test::probe13() + " driver");
  CHECK_MESSAGE(run.status == 0, describe(run));
  CHECK_MESSAGE(run.warnings() == 1, describe(run));  // the double cuMemFreeHost
  ShimRun uninit = env.run("HUGEPIN_ARENA=kv", test::probe13() + " driver-uninit");
  CHECK_MESSAGE(uninit.status == 0, describe(uninit));
}

TEST_CASE("a forked child neither takes nor removes its parent's allocations") {
  ShimEnvironment env;
  test::create_shm_arena(env.shm_dir(), "kv", 0, 32 * kMiB);
  ShimRun run = env.run("HUGEPIN_ARENA=kv", test::probe13() + " fork");
  CHECK_MESSAGE(run.status == 0, describe(run));
  CHECK_MESSAGE(run.says("is in use by another process"), describe(run));  // the child's request went to CUDA
}

TEST_CASE("a runtime loaded with dlopen after start is found") {
  ShimEnvironment env;
  test::create_shm_arena(env.shm_dir(), "kv", 0, 32 * kMiB);
  for (const char* mode : {"client", "global", "handle"}) {
    CAPTURE(mode);
    std::string path = std::string(mode) == "client" ? SHIM_CLIENT_PATH : FAKE_CUDART13_PATH;
    ShimRun run = env.run("HUGEPIN_ARENA=kv", cat(SHIM_DLOPEN_PROBE_PATH, " ", mode, " ", path));
    CHECK_MESSAGE(run.status == 0, describe(run));
    CHECK_MESSAGE(run.warnings() == 0, describe(run));
  }
}

TEST_CASE("a runtime loaded under another file name (libcudart-<hash>.so.13, RTLD_LOCAL) is still found") {
  ShimEnvironment env;
  test::create_shm_arena(env.shm_dir(), "kv", 0, 64 * kMiB);
  ShimRun run = env.run("HUGEPIN_ARENA=kv", cat(SHIM_DLOPEN_PROBE_PATH, " client ", SHIM_CLIENT_HASHED_PATH));
  CHECK_MESSAGE(run.status == 0, describe(run));
  CHECK_MESSAGE(run.warnings() == 0, describe(run));
}

TEST_CASE("references to libcudart.so.13 and libcudart.so.12 bind to the unversioned shim, not to a versioned one") {
  ShimEnvironment env;
  test::create_shm_arena(env.shm_dir(), "kv", 0, 32 * kMiB);
  auto run_with = [&](const char* preload, const std::string& probe, const char* expect) {
    return env.run(cat("HUGEPIN_ARENA=kv LD_PRELOAD=", preload), cat(probe, " alloc 3M:", expect));
  };
  // The shim as shipped: no version node, so versioned references of either runtime bind to it.
  ShimRun shipped13 = run_with(HUGEPIN_PRELOAD_PATH, test::probe13(), "shim");
  CHECK_MESSAGE(shipped13.status == 0, describe(shipped13));
  ShimRun shipped12 = run_with(HUGEPIN_PRELOAD_PATH, test::probe12(), "shim");
  CHECK_MESSAGE(shipped12.status == 0, describe(shipped12));
  // In a node of its own, the definition is passed over: the real runtime serves everything.
  ShimRun named = run_with(HUGEPIN_PRELOAD_NAMED_PATH, test::probe13(), "cuda");
  CHECK_MESSAGE(named.status == 0, describe(named));
  // In the runtime's own node, it binds references to that runtime only.
  ShimRun same13 = run_with(HUGEPIN_PRELOAD_CUDART13_PATH, test::probe13(), "shim");
  CHECK_MESSAGE(same13.status == 0, describe(same13));
  ShimRun same12 = run_with(HUGEPIN_PRELOAD_CUDART13_PATH, test::probe12(), "cuda");
  CHECK_MESSAGE(same12.status == 0, describe(same12));
}

TEST_CASE("the library exports the interposed functions only, unversioned, and needs only libc") {
  test::CommandResult symbols = test::run_command(cat("nm -D --defined-only ", test::preload_path()));
  REQUIRE(symbols.status == 0);
  std::set<std::string> exported;
  std::istringstream lines(symbols.out);
  for (std::string line; std::getline(lines, line);) {
    std::string name = line.substr(line.rfind(' ') + 1);
    exported.insert(name);
  }
  const std::set<std::string> expected{"cudaHostAlloc",  "cudaMallocHost",    "cudaFreeHost",  "cudaHostRegister", "cudaHostUnregister",
                                       "cudaHostGetFlags", "cuMemHostAlloc",  "cuMemAllocHost_v2", "cuMemFreeHost",
                                       "cuMemHostUnregister", "cuMemHostGetFlags"};
  CHECK(exported == expected);  // no "@" either: the names carry no version
  test::CommandResult dynamic = test::run_command(cat("readelf -d ", test::preload_path()));
  REQUIRE(dynamic.status == 0);
  std::istringstream entries(dynamic.out);
  for (std::string line; std::getline(entries, line);) {
    if (line.find("(NEEDED)") == std::string::npos) continue;
    std::string library = line.substr(line.find('[') + 1, line.find(']') - line.find('[') - 1);
    CAPTURE(library);
    CHECK((library == "libc.so.6" || library == "libm.so.6" || library.rfind("ld-linux", 0) == 0));
  }
}

// Issue 20, item 3: a rank held through the shim showed in inspect as "created", no PID, nothing
// pinned.
TEST_CASE("hugepin inspect shows the process that holds a rank through the shim") {
  ShimEnvironment env;
  test::TestArena arena("inspect-shim", test::small_layout(1, 1, 4, kMiB));
  const std::string here = "HUGEPIN_SHM_DIR=" + arena.dir();
  test::HeldProcess holder(env.command(cat(here, " HUGEPIN_ARENA=", arena.name(), " HUGEPIN_RANK=0"),
                                       test::probe13() + " hold 3000001"));
  std::string line = holder.read_line();
  REQUIRE_MESSAGE(line.rfind("table ", 0) == 0, line);

  test::CommandResult json =
      test::run_command(cat("env ", here, " ", HUGEPIN_CLI_PATH, " inspect ", arena.name(), " --json"));
  REQUIRE_MESSAGE(json.status == 0, json.out);
  const auto rank = nlohmann::json::parse(json.out)["arenas"][0]["ranks"][0];
  CHECK(rank["pid"] == 0);  // no worker attached
  REQUIRE(rank["shim"].is_object());
  CHECK(rank["shim"]["pid"] == holder.pid());
  CHECK(rank["shim"]["program"] == "shim_probe13");
  CHECK(rank["shim"]["allocations"] == 1);
  CHECK(rank["shim"]["bytes_given"] == 3002368);  // 733 pages of 4 KiB
  CHECK(rank["shim"]["pinned_bytes"] == 3002368);

  test::CommandResult table = test::run_command(cat("env ", here, " ", HUGEPIN_CLI_PATH, " inspect ", arena.name()));
  CHECK(table.status == 0);
  CHECK_MESSAGE(table.out.find(cat("rank 0 is held through the LD_PRELOAD shim by pid ", holder.pid(),
                                   " (shim_probe13, uid 0): 1 allocation, 2.86 MiB given, 2.86 MiB pinned")) !=
                    std::string::npos,
                table.out);
  CHECK(holder.finish() == 0);
}

TEST_CASE("hugepin shim list shows a running process's allocations; stale and corrupt tables are marked") {
  ShimEnvironment env;
  test::create_shm_arena(env.shm_dir(), "kv", 2, 16 * kMiB);
  test::HeldProcess holder(env.command("HUGEPIN_ARENA=kv HUGEPIN_RANK=2", test::probe13() + " hold 3000001"));
  std::string line = holder.read_line();
  REQUIRE_MESSAGE(line.rfind("table ", 0) == 0, line);
  // A table left by a process that is gone (above any pid_max), and a file that is not a table.
  std::string stale = env.shm_dir() + "/hugepin-shim-table.999999999";
  std::filesystem::copy_file(line.substr(6), stale);
  {
    std::fstream file(stale, std::ios::in | std::ios::out | std::ios::binary);
    int32_t pid = 999999999;
    file.seekp(24);  // Header::pid
    file.write(reinterpret_cast<const char*>(&pid), sizeof pid);
  }
  std::ofstream(env.shm_dir() + "/hugepin-shim-table.77") << "garbage";

  test::CommandResult json = test::run_command(cat("env HUGEPIN_SHM_DIR=", env.shm_dir(), " ", HUGEPIN_CLI_PATH,
                                                   " shim list --json"));
  REQUIRE_MESSAGE(json.status == 0, json.out);
  auto parsed = nlohmann::json::parse(json.out);
  REQUIRE(parsed["processes"].size() == 3);
  std::map<int, nlohmann::json> by_pid;
  for (const auto& process : parsed["processes"]) by_pid[process["pid"].get<int>()] = process;
  const auto& corrupt = by_pid[77];
  CHECK(corrupt["problem"].get<std::string>().find("less than a table header") != std::string::npos);
  const auto& live = by_pid[holder.pid()];
  CHECK(live["alive"] == true);
  CHECK(live["problem"] == "");
  REQUIRE(live["allocations"].size() == 1);
  CHECK(live["allocations"][0]["bytes_asked"] == 3000001);
  CHECK(live["allocations"][0]["bytes_given"] == 3002368);  // 733 pages of 4 KiB
  CHECK(live["allocations"][0]["backing"] == "arena");
  CHECK(live["allocations"][0]["arena"] == "kv");
  CHECK(live["allocations"][0]["rank"] == 2);
  CHECK(by_pid[999999999]["alive"] == false);
  CHECK(by_pid[999999999]["problem"] == "");
  CHECK(by_pid[999999999]["allocations"].size() == 1);

  test::CommandResult table = test::run_command(cat("env HUGEPIN_SHM_DIR=", env.shm_dir(), " ", HUGEPIN_CLI_PATH,
                                                    " shim list"));
  CHECK(table.status == 0);
  CHECK_MESSAGE(table.out.find("arena kv rank 2") != std::string::npos, table.out);
  CHECK_MESSAGE(table.out.find("gone") != std::string::npos, table.out);

  // hugepin inspect shows them too, beside the arenas: owning pid, bytes asked and given.
  test::CommandResult inspect = test::run_command(cat("env HUGEPIN_SHM_DIR=", env.shm_dir(), " ", HUGEPIN_CLI_PATH,
                                                      " inspect --json"));
  REQUIRE_MESSAGE(inspect.status == 0, inspect.out);
  nlohmann::json seen = nlohmann::json::parse(inspect.out);  // not const: operator[] on a missing key must not be UB
  bool found = false;
  for (const auto& process : seen["shim"]) {
    if (process["pid"] != holder.pid()) continue;
    found = true;
    CHECK(process["bytes_asked"] == 3000001);
    CHECK(process["bytes_given"] == 3002368);
  }
  CHECK(found);
  test::CommandResult text = test::run_command(cat("env HUGEPIN_SHM_DIR=", env.shm_dir(), " ", HUGEPIN_CLI_PATH,
                                                   " inspect"));
  CHECK_MESSAGE(text.out.find("LD_PRELOAD shim allocations:") != std::string::npos, text.out);
  CHECK(holder.finish() == 0);
}

}  // namespace hugepin
