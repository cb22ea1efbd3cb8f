#include "tests/support/gate.h"

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "base/error.h"
#include "base/os.h"
#include "base/size.h"

namespace hugepin::test {

int run_or_skip(int argc, char** argv, const std::string& missing) {
  if (!missing.empty()) {
    std::printf("SKIP: needs %s\n", missing.c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}

int run_or_skip(int argc, char** argv, const std::vector<std::string>& missing) {
  std::string line;
  for (const std::string& needs : missing) {
    if (needs.empty()) continue;
    line += line.empty() ? needs : "; " + needs;
  }
  return run_or_skip(argc, argv, line);
}

std::unique_ptr<BorrowedHugepages> BorrowedHugepages::borrow(uint64_t pages, uint64_t page_size,
                                                             std::string* why_not) {
  if (pretend_missing("hugepages")) {
    *why_not = pretended("hugepages", cat(pages, " ", page_size_name(page_size), " hugepages lent to the test"));
    return nullptr;
  }
  if (geteuid() != 0) {
    *why_not = "root (to reserve hugepages and mount hugetlbfs)";
    return nullptr;
  }
  std::unique_ptr<BorrowedHugepages> lent(new BorrowedHugepages());
  lent->page_size_ = page_size;
  lent->nr_file_ = cat("/sys/devices/system/node/node0/hugepages/hugepages-", page_size / kKiB, "kB/nr_hugepages");
  Os& os = real_os();
  try {
    lent->before_ = read_kernel_u64(os, lent->nr_file_);
  } catch (const Error& error) {
    *why_not = cat(page_size_name(page_size), " hugepages on node 0 (", error.what(), ")");
    return nullptr;
  }
  uint64_t want = lent->before_ + pages;
  if (os.write_file(lent->nr_file_, std::to_string(want)) < 0 || read_kernel_u64(os, lent->nr_file_) < want) {
    os.write_file(lent->nr_file_, std::to_string(lent->before_));
    *why_not = cat(pages, " more ", page_size_name(page_size), " hugepages (the kernel could not reserve them)");
    return nullptr;
  }
  char dir[] = "/tmp/hugepin-test-hugetlbfs-XXXXXX";
  if (mkdtemp(dir) == nullptr) {
    *why_not = "a temporary directory";
    return nullptr;
  }
  lent->mount_dir_ = dir;
  std::string options = cat("pagesize=", page_size_name(page_size), ",mode=0700");
  if (os.mount("hugetlbfs", lent->mount_dir_, "hugetlbfs", 0, options) < 0) {
    rmdir(dir);
    lent->mount_dir_.clear();
    *why_not = "a hugetlbfs mount (mount -t hugetlbfs failed)";
    return nullptr;
  }
  return lent;
}

BorrowedHugepages::~BorrowedHugepages() {
  Os& os = real_os();
  if (!mount_dir_.empty()) {
    os.umount(mount_dir_);
    rmdir(mount_dir_.c_str());
  }
  os.write_file(nr_file_, std::to_string(before_));
}

uint64_t BorrowedHugepages::free_pages() const {
  return read_kernel_u64(real_os(), cat("/sys/kernel/mm/hugepages/hugepages-", page_size_ / kKiB, "kB/free_hugepages"));
}

}  // namespace hugepin::test
