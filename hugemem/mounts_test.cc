#include "hugemem/mounts.h"

#include <doctest/doctest.h>

#include "base/error.h"
#include "base/size.h"
#include "tests/support/fault_os.h"
#include "tests/support/temp_dir.h"

namespace hugepin {
namespace {

// Records mount calls instead of making them.
class RecordingOs : public test::ForwardingOs {
 public:
  using ForwardingOs::ForwardingOs;
  int mkdir(const std::string& path, mode_t) override {
    made.push_back(path);
    return -EEXIST;
  }
  int mount(const std::string&, const std::string& target, const std::string& fstype, unsigned long,
            const std::string& data) override {
    mounted = target + " " + fstype + " " + data;
    return 0;
  }
  std::vector<std::string> made;
  std::string mounted;
};

}  // namespace

TEST_CASE("find_hugetlbfs_mount prefers /dev/hugepages and matches the page size") {
  std::vector<HugetlbfsMount> mounts{{"/mnt/a", 2 * kMiB, ""}, {"/dev/hugepages", 2 * kMiB, ""}, {"/mnt/g", kGiB, ""}};
  CHECK(find_hugetlbfs_mount(mounts, 2 * kMiB)->dir == "/dev/hugepages");
  CHECK(find_hugetlbfs_mount(mounts, kGiB)->dir == "/mnt/g");
  CHECK_FALSE(find_hugetlbfs_mount(mounts, 16 * kMiB));
}

TEST_CASE("mount_hugetlbfs passes page size, mode and owner, and is a no-op when mounted") {
  auto rooted = make_rooted_os(test::test_data_path("sysfs/two-node"));
  RecordingOs os(*rooted);
  MountRequest request{"/srv/huge/1g", kGiB, 1000, 1001, 01770};
  CHECK(mount_hugetlbfs(os, request));
  CHECK(os.mounted == "/srv/huge/1g hugetlbfs pagesize=1G,mode=1770,uid=1000,gid=1001");
  CHECK(os.made == std::vector<std::string>{"/srv", "/srv/huge", "/srv/huge/1g"});

  os.mounted.clear();
  CHECK_FALSE(mount_hugetlbfs(os, {"/dev/hugepages", 2 * kMiB, {}, {}, 01770}));
  CHECK(os.mounted.empty());
  CHECK_THROWS_WITH_AS(mount_hugetlbfs(os, {"/dev/hugepages", kGiB, {}, {}, 01770}),
                       doctest::Contains("already holds a hugetlbfs mount of 2M pages"), Error);
}

TEST_CASE("default mount points") {
  CHECK(default_mount_dir(2 * kMiB) == "/dev/hugepages");
  CHECK(default_mount_dir(kGiB) == "/dev/hugepages1G");
}

}  // namespace hugepin
