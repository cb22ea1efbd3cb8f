// What tests read back from files they or the code under test wrote.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace hugepin::test {

// The whole contents of the file at `path`; "" when it cannot be read.
inline std::string file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace hugepin::test
