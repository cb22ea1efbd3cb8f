// hugepind's settings: every daemon option of the HUGEPIN_* table (base/options.h), from four
// places, the first that sets it winning:
//
//   1. a flag            --retention 24h
//   2. the environment   HUGEPIN_RETENTION=24h
//   3. the file          retention = 24h        ([daemon] section; [pool] lines make HUGEPIN_POOL)
//   4. the default       the table's
//
// hugepind is stricter than the shim: a value that does not parse, wherever it comes from, is an
// Error naming where (the flag, the variable, or file:line) and the value, and the daemon does
// not start. The effective options, each with where it came from, are logged at start.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/options.h"
#include "base/os.h"
#include "daemon/config_file.h"
#include "daemon/pool_config.h"
#include "hugemem/backing.h"

namespace hugepin::daemon {

// An option's value in force and where it came from.
struct Setting {
  const OptionSpec* spec = nullptr;
  std::string value;   // "" when unset
  std::string origin;  // "flag --retention", "environment", "/etc/hugepin/hugepind.conf:12", "default"
};

// Every daemon option, parsed, with the settings behind them.
struct LoadedOptions {
  Options options;
  std::vector<Setting> settings;  // one per daemon option, in table order
  ConfigFile file;
  std::vector<PoolEntry> pool;    // HUGEPIN_POOL parsed
};

// Flag values by variable ("HUGEPIN_RETENTION" -> "24h"), as hugepind's command line gave them.
using FlagValues = std::map<std::string, std::string>;

// Reads the configuration file (the HUGEPIN_CONFIG setting; a missing default file is no file,
// a missing file named by a flag or the environment is an Error) and layers flags, environment,
// file and defaults. Throws Error naming the first bad value or line.
LoadedOptions load_options(Os& os, const FlagValues& flags, const OptionSource& environment);

// The daemon's configuration, resolved from the options.
struct DaemonConfig {
  std::string socket_path;
  mode_t socket_mode = 0660;
  std::string group_name;        // as configured ("" for none)
  std::optional<gid_t> group;    // nullopt: no such group (warned) or none configured
  int max_connections = 256;
  int max_connections_per_uid = 32;
  int reserved_connections = 16;
  int64_t request_timeout_ns = 0;
  uint64_t max_request_bytes = 0;
  std::string arena_prefix;
  int64_t reap_interval_ns = 0;
  int64_t retention_ns = 0;      // 0: never
  bool remove_stale = false;
  int64_t stale_grace_ns = 0;
  bool teardown_on_stop = false;
  std::string metrics_dir;       // "": no metrics file
  int64_t metrics_interval_ns = 0;
  ArenaOptions arena;            // hugetlbfs_dir, shm_dir, group: where arenas are made and looked for
  log::Level log_level = log::Level::kInfo;
};

// Resolves `loaded` into a DaemonConfig. The socket path defaults to the first directory of
// `runtime_directory` ($RUNTIME_DIRECTORY, set by systemd's RuntimeDirectory=) or /run/hugepin,
// then hugepind.sock. A group that does not exist is a warning (added to `warnings`) and no group:
// the safe direction (root and owners only). Throws Error for a zero interval.
DaemonConfig resolve_config(const LoadedOptions& loaded, const char* runtime_directory,
                            std::vector<std::string>* warnings);

// "retention = 24h (flag --retention)": one line per setting, for the start-up log.
std::vector<std::string> effective_lines(const LoadedOptions& loaded);

// The gid of group `name`, or nullopt when there is none (getgrnam_r).
std::optional<gid_t> find_group(const std::string& name);

}  // namespace hugepin::daemon
