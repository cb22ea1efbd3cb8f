#include "base/options_man.h"

#include <doctest/doctest.h>

#include <string>

#include "base/error.h"
#include "base/options.h"

namespace hugepin {

TEST_CASE("the shim's page lists every shim variable, and no option of hugepind alone") {
  std::string roff = options_roff(kShimScope, ManStyle::kEnvironment);
  for (const OptionSpec& spec : option_table()) {
    std::string tag = cat("\\fB", spec.variable, "\\fR=");
    CHECK_MESSAGE((roff.find(tag) != std::string::npos) == ((spec.scope & kShimScope) != 0), spec.variable);
  }
  CHECK(roff.find("\\fBHUGEPIN_PAGESIZE\\fR=\\fBauto\\fR|\\fB2M\\fR|\\fB1G\\fR\n") != std::string::npos);
  CHECK(roff.find("\\fBHUGEPIN_MIN_BYTES\\fR=\\fIsize\\fR\n") != std::string::npos);
  CHECK(roff.find("Default: \\fB64M\\fR.\n") != std::string::npos);
  CHECK(roff.find("From 0 to 65535.\n") != std::string::npos);  // HUGEPIN_RANK's range
  CHECK(roff.find("Default: unset.\n") != std::string::npos);   // HUGEPIN_ARENA
  CHECK(option_names(kShimScope, ManStyle::kEnvironment).front() == "HUGEPIN_MIN_BYTES");
}

TEST_CASE("hugepind's page lists every key a configuration file may set, with its variable and flag") {
  std::string roff = options_roff(kDaemonScope, ManStyle::kConfigFile);
  size_t keys = 0;
  for (const OptionSpec& spec : option_table()) {
    if ((spec.scope & kDaemonScope) == 0) continue;
    bool in_file = spec.id != Option::kConfig && spec.id != Option::kPool;
    CHECK_MESSAGE((roff.find(cat("\\fB", config_key(spec), "\\fR = ")) != std::string::npos) == in_file, spec.variable);
    keys += in_file ? 1 : 0;
  }
  CHECK(option_names(kDaemonScope, ManStyle::kConfigFile).size() == keys);
  CHECK(roff.find("Also the variable \\fBHUGEPIN_RETENTION\\fR and the flag \\fB\\-\\-retention\\fR.\n") !=
        std::string::npos);
  CHECK(roff.find("\\fBremove_stale\\fR = \\fIbool\\fR\n") != std::string::npos);
  CHECK(roff.find("Default: \\fBinfo\\fR (hugepind logs") != std::string::npos);  // not the shim's warn
}

TEST_CASE("roff_escape keeps text from being read as requests or escapes") {
  CHECK(roff_escape("plain text") == "plain text");
  CHECK(roff_escape("a-b") == "a\\-b");
  CHECK(roff_escape("C:\\dir") == "C:\\edir");
  CHECK(roff_escape(".starts with a dot") == "\\&.starts with a dot");
  CHECK(roff_escape("'quoted") == "\\&'quoted");
  CHECK(roff_escape("") == "");
}

TEST_CASE("fill_option_markers replaces marker lines and keeps every other line") {
  std::string page = fill_option_markers(".TH X 7\n.SH ENVIRONMENT\n.\\\" hugepin-options: environment shim\n.SH END\n");
  CHECK(page.starts_with(".TH X 7\n.SH ENVIRONMENT\n.TP\n\\fBHUGEPIN_MIN_BYTES\\fR="));
  CHECK(page.ends_with(".SH END\n"));
  CHECK(page.find("hugepin-options") == std::string::npos);

  std::string daemon = fill_option_markers(".\\\" hugepin-options: config-file daemon\n");
  CHECK(daemon == options_roff(kDaemonScope, ManStyle::kConfigFile));
  CHECK(fill_option_markers(".\\\" another comment\n") == ".\\\" another comment\n");

  CHECK_THROWS_WITH_AS(fill_option_markers("x\n.\\\" hugepin-options: table shim\n"),
                       "line 2: unknown style 'table' (environment, config-file)", Error);
  CHECK_THROWS_WITH_AS(fill_option_markers(".\\\" hugepin-options: environment cli\n"),
                       "line 1: unknown scope 'cli' (shim, daemon)", Error);
  CHECK_THROWS_WITH_AS(fill_option_markers(".\\\" hugepin-options: environment shim more\n"),
                       "line 1: unexpected 'more' after the scope", Error);
}

}  // namespace hugepin
