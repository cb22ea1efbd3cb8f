// The pool against recorded sysfs trees (tests/data/sysfs): several topologies, both page sizes,
// malformed files, and a fake kernel that cannot give every page asked for.
#include "hugemem/pool.h"

#include <doctest/doctest.h>

#include "base/error.h"
#include "base/size.h"
#include "tests/support/fault_os.h"
#include "tests/support/temp_dir.h"

namespace hugepin {
namespace {

std::unique_ptr<Os> tree(const std::string& name) { return make_rooted_os(test::test_data_path("sysfs/" + name)); }

// A kernel that holds at most `limit` pages per node: writes above it read back as `limit`.
class ScarceKernel : public test::ForwardingOs {
 public:
  ScarceKernel(Os& target, uint64_t limit) : ForwardingOs(target), limit_(limit) {}
  int write_file(const std::string& path, std::string_view contents) override {
    if (path.find("nr_hugepages") != std::string::npos) {
      uint64_t asked = std::stoull(std::string(contents));
      return target_.write_file(path, std::to_string(std::min(asked, limit_)));
    }
    return target_.write_file(path, contents);
  }

 private:
  uint64_t limit_;
};

}  // namespace

TEST_CASE("one node, no pool: sizes and nodes are found, counts are zero") {
  auto os = tree("one-node");
  PoolState state = read_pool(*os);
  CHECK(state.default_page_size == 2 * kMiB);
  CHECK(state.page_sizes == std::vector<uint64_t>{2 * kMiB, kGiB});
  CHECK(state.nodes == std::vector<int>{0});
  REQUIRE(state.per_node.size() == 2);
  CHECK(state.per_node[0].total == 0);
  CHECK(state.mounts.empty());
  CHECK(state.thp.enabled == "madvise");
  CHECK(state.thp.shmem_enabled == "never");
  CHECK(state.available(0, 2 * kMiB) == 0);
}

TEST_CASE("two nodes: per-node counts, reserved pages and mounts") {
  auto os = tree("two-node");
  PoolState state = read_pool(*os);
  CHECK(state.nodes == std::vector<int>{0, 1});
  const PoolCounts* node0 = state.find(0, 2 * kMiB);
  const PoolCounts* node1 = state.find(1, 2 * kMiB);
  const PoolCounts* system = state.find(-1, 2 * kMiB);
  REQUIRE(node0 != nullptr);
  REQUIRE(node1 != nullptr);
  REQUIRE(system != nullptr);
  CHECK(node0->total == 1024);
  CHECK(node0->free == 1000);
  CHECK(node1->free == 512);
  CHECK(system->reserved == 10);
  CHECK(state.available(-1, 2 * kMiB) == 1512 - 10);
  CHECK(state.available(1, 2 * kMiB) == 512);
  CHECK(state.find(0, kGiB)->free == 4);
  REQUIRE(state.mounts.size() == 3);
  CHECK(state.mounts[0].dir == "/dev/hugepages");
  CHECK(state.mounts[0].page_size == 2 * kMiB);
  CHECK(state.mounts[1].page_size == kGiB);
  // No pagesize= option: the default size; an escaped space in the path is decoded.
  CHECK(state.mounts[2].dir == "/mnt/my huge");
  CHECK(state.mounts[2].page_size == 2 * kMiB);
}

TEST_CASE("eight nodes are read in order with their own counts") {
  auto os = tree("eight-node");
  PoolState state = read_pool(*os);
  REQUIRE(state.nodes.size() == 8);
  CHECK(state.nodes.back() == 7);
  CHECK(state.per_node.size() == 16);
  CHECK(state.find(7, 2 * kMiB)->free == 2048 - 700);
  CHECK(state.find(-1, kGiB)->total == 128);
}

TEST_CASE("a kernel without NUMA has system rows only") {
  auto os = tree("no-numa");
  PoolState state = read_pool(*os);
  CHECK(state.nodes.empty());
  CHECK(state.per_node.empty());
  CHECK(state.find(-1, 2 * kMiB)->free == 64);
  CHECK(state.available(-1, 2 * kMiB) == 64);
}

TEST_CASE("a malformed count is an error naming the file and its content") {
  auto os = tree("malformed");
  try {
    read_pool(*os);
    FAIL("read_pool accepted a malformed file");
  } catch (const Error& error) {
    std::string message = error.what();
    CHECK(message.find("node0/hugepages/hugepages-2048kB/free_hugepages") != std::string::npos);
    CHECK(message.find("'abc'") != std::string::npos);
  }
}

TEST_CASE("set_pool splits over the nodes, writes per node and reads back") {
  test::TempDir dir;
  test::copy_test_tree("sysfs/two-node", dir.path() + "/root");
  auto os = make_rooted_os(dir.path() + "/root");
  std::vector<PoolChange> changes = set_pool(*os, 3 * kMiB * 1000 + 1, std::nullopt, 2 * kMiB);
  // ceil(3000 MiB + 1 byte / 2 MiB) = 1501 pages over 2 nodes: 751 + 750.
  REQUIRE(changes.size() == 2);
  CHECK(changes[0].asked == 751);
  CHECK(changes[1].asked == 750);
  CHECK(changes[0].before == 1024);
  CHECK(changes[0].after == 751);
  CHECK(shortfall_message(changes).empty());
  CHECK(read_kernel_u64(*os, "/sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages") == 750);
}

TEST_CASE("set_pool on one node leaves the others alone") {
  test::TempDir dir;
  test::copy_test_tree("sysfs/two-node", dir.path() + "/root");
  auto os = make_rooted_os(dir.path() + "/root");
  std::vector<PoolChange> changes = set_pool(*os, 2 * kGiB, 1, kGiB);
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].node == 1);
  CHECK(changes[0].after == 2);
  CHECK(read_kernel_u64(*os, "/sys/devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages") == 4);
}

TEST_CASE("a shortfall is reported with the numbers, and 1 GiB points at boot time") {
  test::TempDir dir;
  test::copy_test_tree("sysfs/two-node", dir.path() + "/root");
  auto rooted = make_rooted_os(dir.path() + "/root");
  ScarceKernel kernel(*rooted, 2);
  std::vector<PoolChange> changes = set_pool(kernel, 18 * kGiB, 0, kGiB);
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].short_of_target());
  std::string message = shortfall_message(changes);
  CHECK(message.find("node 0: asked for 18 1G pages, got 2 (16 short)") != std::string::npos);
  CHECK(message.find("hugepagesz=1G") != std::string::npos);
}

TEST_CASE("set_pool refuses an unknown node or page size and changes nothing") {
  test::TempDir dir;
  test::copy_test_tree("sysfs/two-node", dir.path() + "/root");
  auto os = make_rooted_os(dir.path() + "/root");
  CHECK_THROWS_WITH_AS(set_pool(*os, kGiB, 5, 2 * kMiB), "NUMA node 5 does not exist (nodes: 2)", Error);
  CHECK_THROWS_WITH_AS(set_pool(*os, kGiB, 0, 16 * kMiB),
                       "page size 16M is not supported by this kernel (supported: 2M, 1G)", Error);
  CHECK(read_kernel_u64(*os, "/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages") == 1024);
}

TEST_CASE("a write the kernel refuses is an error naming the file") {
  test::TempDir dir;
  test::copy_test_tree("sysfs/one-node", dir.path() + "/root");
  auto rooted = make_rooted_os(dir.path() + "/root");
  test::FaultInjectionOs os(*rooted);
  os.fail("write_file", EACCES);
  try {
    set_pool(os, kGiB, 0, 2 * kMiB);
    FAIL("set_pool ignored a refused write");
  } catch (const Error& error) {
    std::string message = error.what();
    CHECK(message.find("cannot write 512 to /sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages") == 0);
    CHECK(message.find("needs root") != std::string::npos);
    CHECK(error.errno_value() == EACCES);
  }
}

TEST_CASE("pool_set_hint gives the command that adds the missing pages") {
  auto os = tree("two-node");
  PoolState state = read_pool(*os);
  CHECK(pool_set_hint(state, 1, 2 * kMiB, 88) == "hugepin pool set 1200M --node 1 --pagesize 2M");
  CHECK(pool_set_hint(state, 0, kGiB, 2) == "hugepin pool set 6G --node 0 --pagesize 1G");
}

}  // namespace hugepin
