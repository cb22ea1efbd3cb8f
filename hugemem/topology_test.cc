#include "hugemem/topology.h"

#include <doctest/doctest.h>

#include "base/error.h"
#include "tests/support/temp_dir.h"

namespace hugepin {

TEST_CASE("parse_id_list reads ranges and single ids") {
  CHECK(parse_id_list("0-3,8,10-11\n") == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(parse_id_list("5") == std::vector<int>{5});
  CHECK(parse_id_list("\n").empty());
  CHECK_THROWS_AS(parse_id_list("0-x"), Error);
  CHECK_THROWS_AS(parse_id_list("3-1"), Error);
  CHECK_THROWS_AS(parse_id_list("1,,2"), Error);
}

TEST_CASE("topology of recorded trees") {
  auto two = make_rooted_os(test::test_data_path("sysfs/two-node"));
  Topology topology = read_topology(*two);
  REQUIRE(topology.nodes.size() == 2);
  CHECK(topology.nodes[1].id == 1);
  CHECK(topology.nodes[1].cpus.size() == 32);
  CHECK(topology.nodes[1].cpus.front() == 16);

  auto none = make_rooted_os(test::test_data_path("sysfs/no-numa"));
  Topology flat = read_topology(*none);
  REQUIRE(flat.nodes.size() == 1);
  CHECK(flat.nodes[0].id == 0);
  CHECK(flat.nodes[0].cpus == std::vector<int>{0, 1, 2, 3});

  auto bad = make_rooted_os(test::test_data_path("sysfs/malformed-cpulist"));
  CHECK_THROWS_WITH_AS(read_topology(*bad), "malformed id list '0-x': '0-x' is not N or N-M", Error);
}

TEST_CASE("a GPU's node comes from its PCI device") {
  auto os = make_rooted_os(test::test_data_path("sysfs/two-node"));
  CHECK(pci_device_node(*os, "0000:17:00.0") == 0);
  CHECK(pci_device_node(*os, "CA:00.0") == 1);
  CHECK(pci_device_node(*os, "0000:00:02.0") == -1);
  CHECK_THROWS_WITH_AS(pci_device_node(*os, "0000:99:00.0"),
                       doctest::Contains("PCI device 0000:99:00.0 not found"), Error);
  CHECK_THROWS_WITH_AS(pci_device_node(*os, "gpu0"), doctest::Contains("invalid PCI address 'gpu0'"), Error);
  auto bad = make_rooted_os(test::test_data_path("sysfs/malformed-pci"));
  CHECK_THROWS_WITH_AS(pci_device_node(*bad, "0000:17:00.0"), doctest::Contains("'node' is not a node number"), Error);
}

}  // namespace hugepin
