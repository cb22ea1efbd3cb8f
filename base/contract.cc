#include "base/contract.h"

#include <unistd.h>

#include <cstdlib>
#include <exception>

namespace hugepin {

void contract_violated(const char* file, int line, const char* condition, std::string_view values) noexcept {
  try {
    std::string text = cat("hugepin: contract violated at ", file, ":", line, ": ", condition);
    if (!values.empty()) text.append(" (").append(values).append(")");
    text.push_back('\n');
    // One write: the line stays whole among other threads' and processes' output.
    ssize_t ignored = ::write(STDERR_FILENO, text.data(), text.size());
    (void)ignored;
  } catch (...) {
    // Out of memory while reporting: abort all the same.
  }
  std::abort();
}

}  // namespace hugepin
