// Tests that need hardware say what they need and skip (exit 77, ctest's SKIP_RETURN_CODE)
// when it is missing, as liburing's and DPDK's do. Such cases live in their own binaries
// (hugepin_test(... GATED ...), cmake/HugepinTargets.cmake), each with a main that checks its
// prerequisites (tests/support/prerequisite.h); the cases any machine can run stay in the ordinary
// binaries.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/prerequisite.h"

namespace hugepin::test {

// Runs the doctest suite; or, when `missing` is not empty, prints the one line "SKIP: needs
// <missing>" and returns 77 without running anything.
int run_or_skip(int argc, char** argv, const std::string& missing);
// The same for several prerequisites: `missing` holds, for each, what it needs ("" when the
// machine has it); the line names every one that is missing, separated by "; ".
int run_or_skip(int argc, char** argv, const std::vector<std::string>& missing);

// A hugepage pool lent to a test: adds pages of `page_size` to node 0's pool and mounts a
// private hugetlbfs for them; gives both back when destroyed. Needs root.
class BorrowedHugepages {
 public:
  // Returns null and sets *why_not when the machine cannot lend the pages (not root, no
  // hugetlbfs, the kernel gave fewer pages than asked), or when HUGEPIN_TEST_MISSING names
  // "hugepages".
  static std::unique_ptr<BorrowedHugepages> borrow(uint64_t pages, uint64_t page_size, std::string* why_not);
  ~BorrowedHugepages();
  BorrowedHugepages(const BorrowedHugepages&) = delete;
  BorrowedHugepages& operator=(const BorrowedHugepages&) = delete;

  const std::string& mount_dir() const { return mount_dir_; }
  uint64_t page_size() const { return page_size_; }
  // Free pages of this size on the whole system now (HugePages_Free for 2 MiB).
  uint64_t free_pages() const;

 private:
  BorrowedHugepages() = default;
  std::string nr_file_;
  uint64_t before_ = 0;
  uint64_t page_size_ = 0;
  std::string mount_dir_;
};

}  // namespace hugepin::test
