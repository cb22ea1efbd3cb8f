// The shim's private hugepage mappings on real hugetlbfs, in real processes under LD_PRELOAD.
// Needs root: borrows 2 MiB pages from the kernel, mounts a private hugetlbfs, gives both back.
// Skips (77) where the machine cannot lend them. A failed mbind: shim_mbind_test.cc.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/error.h"
#include "base/size.h"
#include "shim/testing/shim_test_support.h"
#include "tests/support/file_text.h"
#include "tests/support/gate.h"

namespace hugepin {
namespace {

constexpr uint64_t kPages = 96;
test::BorrowedHugepages* g_pool = nullptr;

// A PCI device this machine has, to stand in for the GPU ("" when sysfs lists none).
std::string real_pci_device() {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/bus/pci/devices", error)) {
    return entry.path().filename().string();
  }
  return "";
}

// The shim on this machine's real pool, private mappings in the borrowed mount.
std::string private_mode() {
  std::string gpu = real_pci_device();
  return cat("HUGEPIN_SYSROOT=/ HUGEPIN_HUGETLBFS_DIR=", g_pool->mount_dir(), " PROBE_PAGE=", 2 * kMiB,
             gpu.empty() ? std::string() : " FAKE_CUDA_PCI_BUS_ID=" + gpu);
}

}  // namespace

TEST_CASE("a private mapping takes exactly its pages, shows in the process's maps, and gives them back") {
  test::ShimEnvironment env;
  uint64_t free_before = g_pool->free_pages();
  test::HeldProcess holder(env.command(private_mode(), test::probe13() + " hold 5000001"));
  std::string line = holder.read_line();
  REQUIRE_MESSAGE(line.rfind("table ", 0) == 0, line);
  // 5000001 bytes are 3 pages of 2 MiB: prefaulted, so taken from the pool now.
  CHECK(g_pool->free_pages() == free_before - 3);
  std::string maps = test::file_text(cat("/proc/", holder.pid(), "/maps"));
  std::string file = cat(g_pool->mount_dir(), "/hugepin-shim.", holder.pid(), ".");
  CHECK_MESSAGE(maps.find(file) != std::string::npos, maps);
  CHECK(maps.find("(deleted)") != std::string::npos);  // unlinked: nothing stays if the process dies
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(g_pool->mount_dir())) left.push_back(entry.path());
  CHECK(left.empty());
  CHECK(holder.finish() == 0);
  CHECK(g_pool->free_pages() == free_before);
}

TEST_CASE("private mappings route, size and register like the arena's") {
  test::ShimEnvironment env;
  for (const char* scenario : {"alloc 512K:cuda 3M:shim 2M:shim 4194305:shim", "calls", "double-free", "driver",
                               "fork", "threads 4"}) {
    CAPTURE(scenario);
    test::ShimRun run = env.run(private_mode(), cat(test::probe13(), " ", scenario));
    CHECK_MESSAGE(run.status == 0, describe(run));
  }
}

TEST_CASE("strict mode binds the mapping to the GPU's node") {
  test::ShimEnvironment env;
  // The recorded two-node tree puts 0000:17:00.0 on node 0, which every machine has.
  test::ShimRun run = env.run(cat("HUGEPIN_STRICT=1 HUGEPIN_HUGETLBFS_DIR=", g_pool->mount_dir(),
                                  " FAKE_CUDA_PCI_BUS_ID=0000:17:00.0 HUGEPIN_LOG=info"),
                              test::probe13() + " alloc 3M:shim");
  CHECK_MESSAGE(run.status == 0, describe(run));
  CHECK_MESSAGE(run.says("served: 4.00 MiB of 2M pages on node 0 (private)"), describe(run));
  CHECK(run.warnings() == 0);
}

}  // namespace hugepin

int main(int argc, char** argv) {
  std::string why_not;
  std::unique_ptr<hugepin::test::BorrowedHugepages> pool =
      hugepin::test::BorrowedHugepages::borrow(hugepin::kPages, 2 * hugepin::kMiB, &why_not);
  hugepin::g_pool = pool.get();
  return hugepin::test::run_or_skip(argc, argv, pool ? "" : why_not);
}
