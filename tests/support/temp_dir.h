// A directory for one test, removed with everything in it when the test ends.
#pragma once

#include <string>

namespace hugepin::test {

class TempDir {
 public:
  // A new directory under `parent` (default: the system's temporary directory).
  explicit TempDir(const std::string& parent = "");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Copies a recorded tree from tests/data/<name> into `dir`, so a test may write to it.
void copy_test_tree(const std::string& name, const std::string& dir);

// tests/data/<name>
std::string test_data_path(const std::string& name);

}  // namespace hugepin::test
