#include "tests/support/prerequisite.h"

#include <cstdlib>

#include "base/error.h"

namespace hugepin::test {

bool pretend_missing(std::string_view prerequisite) {
  const char* names = std::getenv(kPretendMissingVariable);
  if (names == nullptr) return false;
  std::string_view rest = names;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    if (rest.substr(0, comma) == prerequisite) return true;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return false;
}

std::string pretended(std::string_view prerequisite, std::string_view needs) {
  return cat(needs, " (", kPretendMissingVariable, " names ", prerequisite, ")");
}

}  // namespace hugepin::test
