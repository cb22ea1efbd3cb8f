#include "tests/support/temp_dir.h"

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>

namespace hugepin::test {

TempDir::TempDir(const std::string& parent) {
  std::filesystem::path root = parent.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(parent);
  std::string pattern = (root / "hugepin-test-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string test_data_path(const std::string& name) { return std::string(HUGEPIN_TEST_DATA_DIR) + "/" + name; }

void copy_test_tree(const std::string& name, const std::string& dir) {
  std::filesystem::copy(test_data_path(name), dir, std::filesystem::copy_options::recursive);
}

}  // namespace hugepin::test
