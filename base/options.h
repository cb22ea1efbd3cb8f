// The HUGEPIN_* options: one table (mimalloc's options.c) holding each option's environment
// variable, default, type, one-line doc and who reads it (the LD_PRELOAD shim, hugepind, or
// both). The shim and the daemon read them the same way; `hugepin shim env` prints the shim's.
// hugepind also takes each of its options as a line of its configuration file (config_key:
// HUGEPIN_RETENTION is `retention`) and as a flag (flag_name: `--retention`).
//
// A value that does not parse is reported as one line naming the variable and the value, and the
// default is kept: a typo never changes behaviour silently, and never stops a process (hugepind
// goes further and refuses to start: see daemon/config.h). An empty value counts as unset.
//
// Thread-safety: the table is immutable; Options is a value, safe to read from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hugepin {

// kDuration: "90s", "24h" (base/duration.h), held in nanoseconds; kMode: octal permission bits
// ("0660"), 0 to 07777.
enum class OptionType { kSize, kBool, kInt, kString, kChoice, kDuration, kMode };

// Who reads an option: a bit mask.
inline constexpr unsigned kShimScope = 1;
inline constexpr unsigned kDaemonScope = 2;
inline constexpr unsigned kAllScopes = kShimScope | kDaemonScope;

enum class Option {
  kMinBytes,
  kArena,
  kRank,
  kPageSize,
  kHugetlbfsDir,
  kShmDir,
  kStrict,
  kLog,
  kDisable,
  kSysroot,
  // hugepind (daemon/config.h) and `hugepin pool apply`.
  kConfig,
  kSocket,
  kSocketMode,
  kGroup,
  kMaxConnections,
  kMaxConnectionsPerUid,
  kReservedConnections,
  kRequestTimeout,
  kMaxRequestBytes,
  kArenaPrefix,
  kReapInterval,
  kRetention,
  kRemoveStale,
  kStaleGrace,
  kTeardownOnStop,
  kMetricsDir,
  kMetricsInterval,
  kPool,
  kPoolAllowShortfall,
};
inline constexpr size_t kOptionCount = 29;

struct OptionSpec {
  Option id;
  std::string_view variable;       // "HUGEPIN_MIN_BYTES"
  std::string_view default_value;  // as a user would write it; "" when the default is "unset"
  OptionType type;
  std::string_view choices;        // kChoice: "auto|2M|1G"; empty otherwise
  int64_t min = 0;                 // kInt: the accepted range
  int64_t max = 0;
  std::string_view doc;            // one line
  unsigned scope = kShimScope;     // kShimScope, kDaemonScope or both
};

// Every option, in the order `hugepin shim env` lists them.
std::span<const OptionSpec> option_table();
const OptionSpec& option_spec(Option id);
std::string_view type_name(OptionType type);
// The option of `key` as a configuration file names it ("retention"), or null.
const OptionSpec* find_option_by_key(std::string_view key);
// "retention" for HUGEPIN_RETENTION: the variable without its prefix, in lower case.
std::string config_key(const OptionSpec& spec);
// "--remove-stale" for HUGEPIN_REMOVE_STALE: the config key with '-' for '_'.
std::string flag_name(const OptionSpec& spec);
// Why `text` is not a value of `spec` ("is not a duration (examples: ...)"); "" when it is.
std::string option_value_problem(const OptionSpec& spec, std::string_view text);

// Where values come from: returns the text of `variable`, or null when it is not set. The
// process environment (getenv) in production, a map in tests.
using OptionSource = std::function<const char*(const char* variable)>;
OptionSource environment_source();

// The parsed value of every option. Getters REQUIRE the option to have that type.
class Options {
 public:
  // Every option at its default.
  Options();

  // Parses every option of `scope` from `source` (the others keep their defaults). A value that
  // does not parse keeps the default and adds one line to `problems` (when given) naming the
  // variable and the value.
  static Options parse(const OptionSource& source, std::vector<std::string>* problems = nullptr,
                       unsigned scope = kAllScopes);

  uint64_t size(Option id) const;
  int64_t duration_ns(Option id) const;
  uint32_t mode(Option id) const;
  bool flag(Option id) const;
  // kInt: the value; REQUIRES is_set(id) or a non-empty default.
  int64_t integer(Option id) const;
  // kString and kChoice (normalized to the table's spelling); "" when unset.
  const std::string& text(Option id) const;
  // True when the source set the option to a valid value (not the default).
  bool is_set(Option id) const;

 private:
  struct Value {
    std::string text;
    uint64_t number = 0;
    bool set = false;
  };
  const Value& value(Option id, OptionType type) const;

  std::array<Value, kOptionCount> values_;
};

// One option as `hugepin shim env` shows it.
struct EffectiveOption {
  const OptionSpec* spec = nullptr;
  bool present = false;   // the source set it (to a non-empty text)
  std::string raw;        // the source's text when present
  std::string problem;    // why `raw` was rejected; "" when it was accepted or absent
  std::string effective;  // the value in force: raw when accepted, else the default
};

// One row per option of `scope`, in table order.
std::vector<EffectiveOption> effective_options(const OptionSource& source, unsigned scope = kAllScopes);

}  // namespace hugepin
