// The metrics file: written whole (temporary file, rename), and never through a link someone
// planted at the temporary name in a shared textfile directory.
#include "daemon/metrics_file.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <fstream>

#include "tests/support/file_text.h"
#include "tests/support/temp_dir.h"

namespace hugepin::daemon {

TEST_CASE("the metrics file is replaced whole, and a link at the temporary name is not followed") {
  test::TempDir dir("/tmp");
  const std::string victim = dir.path() + "/victim";
  std::ofstream(victim) << "keep me";
  const std::string temporary = dir.path() + "/hugepin.prom.tmp";
  REQUIRE(symlink(victim.c_str(), temporary.c_str()) == 0);
  DaemonFigures figures;
  figures.up = true;
  figures.requests_ok = 7;
  write_metrics_file(real_os(), dir.path(), daemon_metrics_text(figures));
  CHECK(test::file_text(victim) == "keep me");
  const std::string text = test::file_text(dir.path() + "/hugepin.prom");
  CHECK(text.find("hugepind_up 1") != std::string::npos);
  CHECK(access(temporary.c_str(), F_OK) != 0);  // renamed away
}

}  // namespace hugepin::daemon
