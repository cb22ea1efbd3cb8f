// The shim against the installed CUDA runtime (built only where a toolkit provides
// libcudart.so.13; no GPU needed): a program linked against the real library references
// cudaHostAlloc@libcudart.so.13, the shim's definitions take those references, and every call
// returns what it returns without the shim, last error included.
#include <doctest/doctest.h>

#include <sstream>

#include "base/error.h"
#include "shim/testing/shim_test_support.h"

namespace hugepin {

TEST_CASE("under the shim, the real runtime's answers are unchanged, call by call") {
  test::ShimEnvironment env;
  test::CommandResult plain = test::run_command(REAL_CUDART_PROBE_PATH);
  REQUIRE(plain.status == 0);
  test::ShimRun shimmed = env.run("HUGEPIN_LOG=info", REAL_CUDART_PROBE_PATH);
  REQUIRE(shimmed.status == 0);
  std::string answers;
  int shim_lines = 0;
  std::istringstream lines(shimmed.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("hugepin-shim[", 0) == 0) {
      ++shim_lines;  // the shim's own lines: it was called
    } else {
      answers += line + "\n";
    }
  }
  CHECK_MESSAGE(shim_lines > 0, shimmed.out);
  CHECK_MESSAGE(answers == plain.out, cat("without the shim:\n", plain.out, "with it:\n", shimmed.out));
}

}  // namespace hugepin
