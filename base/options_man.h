// The HUGEPIN_* options table (base/options.h) as roff, for the man pages written at build time
// (man/CMakeLists.txt): hugepin-shim(7) lists the shim's variables, hugepind.conf(5) hugepind's
// keys. A row added to base/options.cc appears in both pages without editing either.
//
// A page template marks where the options go with a roff comment line, which leaves the
// template itself a valid page:
//
//   .\" hugepin-options: environment shim      the shim's rows, as HUGEPIN_* variables
//   .\" hugepin-options: config-file daemon    hugepind's rows, as configuration file keys
//
// Thread-safety: pure functions over the immutable table.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hugepin {

enum class ManStyle {
  kEnvironment,  // HUGEPIN_MIN_BYTES=size: the variable, its doc, its default
  kConfigFile,   // retention = duration: the key, its doc, its default, its variable and flag
};

// One `.TP` entry per option of `scope` (kShimScope, kDaemonScope), in table order. kConfigFile
// leaves out the two daemon options a configuration file cannot set as keys (daemon/config.cc):
// HUGEPIN_CONFIG (the file itself) and HUGEPIN_POOL (the [pool] section).
std::string options_roff(unsigned scope, ManStyle style);

// The names options_roff lists: variables for kEnvironment, keys for kConfigFile.
std::vector<std::string> option_names(unsigned scope, ManStyle style);

// `text` as roff text: backslashes as \e, '-' as \- (a minus that copies as one), and \& before
// a leading '.' or '\''. `text` must be one line.
std::string roff_escape(std::string_view text);

// `page` with each marker line (above) replaced by its entries. Throws Error naming the line for
// a marker of an unknown style or scope.
std::string fill_option_markers(std::string_view page);

}  // namespace hugepin
