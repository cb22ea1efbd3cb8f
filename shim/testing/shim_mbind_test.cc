// The shim's private hugepage mapping when binding it to the GPU's node fails: the mapping goes
// back to the pool and the allocation falls to CUDA, with one warning. In a real process under
// LD_PRELOAD, on real hugetlbfs (2 MiB pages borrowed from the kernel, as root). The recorded
// eight-node tree puts the fake GPU on node 7, so the mbind fails only on a machine without a node
// 7: skips (77) on one that has it, or where the machine cannot lend the pages.
#include <doctest/doctest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "base/error.h"
#include "base/size.h"
#include "shim/testing/shim_test_support.h"
#include "tests/support/gate.h"

namespace hugepin {
namespace {

constexpr uint64_t kPages = 8;
test::BorrowedHugepages* g_pool = nullptr;

// "no_node7": what the test needs when this machine has a NUMA node 7 ("" when it has none).
std::string missing_no_node7() {
  const std::string needs = "a machine without NUMA node 7 (the node an mbind must fail on)";
  if (test::pretend_missing("no_node7")) return test::pretended("no_node7", needs);
  return std::filesystem::exists("/sys/devices/system/node/node7") ? needs : "";
}

}  // namespace

TEST_CASE("a failed mbind releases the mapping and falls to CUDA") {
  test::ShimEnvironment env;
  uint64_t free_before = g_pool->free_pages();
  // The recorded eight-node tree puts 0000:db:00.0 on node 7, which this machine lacks.
  test::ShimRun run = env.run(cat("HUGEPIN_SYSROOT=", test::test_data_path("sysfs/eight-node"), " HUGEPIN_HUGETLBFS_DIR=",
                                  g_pool->mount_dir(), " FAKE_CUDA_PCI_BUS_ID=0000:db:00.0"),
                              test::probe13() + " alloc 3M:cuda 3M:cuda");
  CHECK_MESSAGE(run.status == 0, describe(run));
  CHECK_MESSAGE(run.warnings() == 1, describe(run));
  CHECK_MESSAGE(run.says("cannot bind 4.00 MiB to NUMA node 7"), describe(run));
  CHECK(g_pool->free_pages() == free_before);
}

}  // namespace hugepin

int main(int argc, char** argv) {
  // Node 7 first: a machine that has it skips without borrowing pages it would not use.
  if (std::string node7 = hugepin::missing_no_node7(); !node7.empty()) return hugepin::test::run_or_skip(argc, argv, node7);
  std::string why_not;
  std::unique_ptr<hugepin::test::BorrowedHugepages> pool =
      hugepin::test::BorrowedHugepages::borrow(hugepin::kPages, 2 * hugepin::kMiB, &why_not);
  hugepin::g_pool = pool.get();
  return hugepin::test::run_or_skip(argc, argv, why_not);
}
