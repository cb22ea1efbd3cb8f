#include "daemon/config.h"

#include <grp.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "base/duration.h"
#include "base/error.h"

namespace hugepin::daemon {
namespace {

constexpr std::string_view kDefaultRuntimeDir = "/run/hugepin";
constexpr std::string_view kSocketName = "hugepind.sock";

// The spec of a daemon option named by its variable, or an Error naming `where`.
const OptionSpec& daemon_spec(std::string_view variable, std::string_view where) {
  for (const OptionSpec& spec : option_table()) {
    if (spec.variable == variable && (spec.scope & kDaemonScope) != 0) return spec;
  }
  throw Error(cat(where, ": ", variable, " is not a hugepind option (hugepind --help lists them)"));
}

void check_value(const OptionSpec& spec, const std::string& value, std::string_view where, std::string_view name) {
  if (value.empty()) return;
  if (std::string why = option_value_problem(spec, value); !why.empty()) {
    throw Error(cat(where, name, "'", value, "' ", why));
  }
}

// The file's [daemon] values by variable, checked; its [pool] lines joined as HUGEPIN_POOL.
struct FileValues {
  std::map<std::string, std::pair<std::string, std::string>> by_variable;  // variable -> (value, "path:line")
};

FileValues file_values(const ConfigFile& file) {
  FileValues values;
  std::vector<PoolEntry> pool;
  std::string pool_where;
  for (const ConfigLine& line : file.lines) {
    const std::string where = file.where(line);
    if (line.section == "pool") {
      try {
        pool.push_back(parse_pool_entry(line.key, line.value));
        parse_pool_list(format_pool_list(pool));  // the same page size and node twice
      } catch (const Error& error) {
        throw Error(cat(where, ": ", error.what()));
      }
      if (pool_where.empty()) pool_where = where;
      continue;
    }
    const OptionSpec* spec = find_option_by_key(line.key);
    if (spec == nullptr || (spec->scope & kDaemonScope) == 0) {
      throw Error(cat(where, ": unknown key '", line.key, "' (hugepind --help lists the keys)"));
    }
    if (spec->id == Option::kConfig) throw Error(cat(where, ": 'config' cannot be set in the configuration file"));
    if (spec->id == Option::kPool) throw Error(cat(where, ": set pool pages in the [pool] section, one line each"));
    check_value(*spec, line.value, cat(where, ": "), cat(line.key, " = "));
    values.by_variable[std::string(spec->variable)] = {line.value, where};
  }
  if (!pool.empty()) {
    values.by_variable[std::string(option_spec(Option::kPool).variable)] = {format_pool_list(pool), pool_where};
  }
  return values;
}

std::string environment_value(const OptionSource& environment, const OptionSpec& spec) {
  const char* raw = environment(spec.variable.data());  // table strings are NUL-terminated
  return raw == nullptr ? std::string() : std::string(raw);
}

// Where the configuration file is, and whether it may be missing (only the default may).
std::pair<std::string, bool> config_path(const FlagValues& flags, const OptionSource& environment) {
  const OptionSpec& spec = option_spec(Option::kConfig);
  if (auto it = flags.find(std::string(spec.variable)); it != flags.end() && !it->second.empty()) {
    return {it->second, false};
  }
  if (std::string value = environment_value(environment, spec); !value.empty()) return {value, false};
  return {std::string(spec.default_value), true};
}

}  // namespace

LoadedOptions load_options(Os& os, const FlagValues& flags, const OptionSource& environment) {
  for (const auto& [variable, value] : flags) {
    const OptionSpec& spec = daemon_spec(variable, "command line");
    check_value(spec, value, "", cat(flag_name(spec), " "));
  }
  for (const OptionSpec& spec : option_table()) {
    if ((spec.scope & kDaemonScope) == 0) continue;
    check_value(spec, environment_value(environment, spec), "", cat(spec.variable, "="));
  }
  LoadedOptions loaded;
  auto [path, missing_ok] = config_path(flags, environment);
  loaded.file = read_config_file(os, path, missing_ok);
  const FileValues file = file_values(loaded.file);

  std::map<std::string, std::string> chosen;
  for (const OptionSpec& spec : option_table()) {
    if ((spec.scope & kDaemonScope) == 0) continue;
    const std::string variable(spec.variable);
    Setting setting{&spec, std::string(spec.default_value), "default"};
    if (auto it = flags.find(variable); it != flags.end() && !it->second.empty()) {
      setting.value = it->second;
      setting.origin = cat("flag ", flag_name(spec));
    } else if (std::string value = environment_value(environment, spec); !value.empty()) {
      setting.value = value;
      setting.origin = "environment";
    } else if (auto line = file.by_variable.find(variable); line != file.by_variable.end() && !line->second.first.empty()) {
      setting.value = line->second.first;
      setting.origin = line->second.second;
    }
    if (setting.origin != "default") chosen[variable] = setting.value;
    loaded.settings.push_back(std::move(setting));
  }
  std::vector<std::string> problems;
  loaded.options = Options::parse(
      [&chosen](const char* variable) -> const char* {
        auto it = chosen.find(variable);
        return it == chosen.end() ? nullptr : it->second.c_str();
      },
      &problems, kDaemonScope);
  if (!problems.empty()) throw Error(problems.front());  // checked above: a table and checker out of step
  try {
    loaded.pool = parse_pool_list(loaded.options.text(Option::kPool));
  } catch (const Error& error) {
    for (const Setting& setting : loaded.settings) {
      if (setting.spec->id == Option::kPool) throw Error(cat(setting.origin, ": ", error.what()));
    }
    throw;
  }
  return loaded;
}

std::optional<gid_t> find_group(const std::string& name) {
  if (name.empty()) return std::nullopt;
  group entry{};
  group* found = nullptr;
  std::vector<char> buffer(16384);
  for (;;) {
    int rc = getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found);
    if (rc == ERANGE && buffer.size() < (1u << 22)) {
      buffer.resize(buffer.size() * 4);
      continue;
    }
    if (rc != 0 || found == nullptr) return std::nullopt;
    return found->gr_gid;
  }
}

DaemonConfig resolve_config(const LoadedOptions& loaded, const char* runtime_directory,
                            std::vector<std::string>* warnings) {
  const Options& o = loaded.options;
  DaemonConfig config;
  config.socket_path = o.text(Option::kSocket);
  if (config.socket_path.empty()) {
    std::string dir(kDefaultRuntimeDir);
    if (runtime_directory != nullptr && *runtime_directory != '\0') {
      std::string_view first(runtime_directory);
      dir = std::string(first.substr(0, first.find(':')));  // systemd lists several with ':'
    }
    config.socket_path = cat(dir, "/", kSocketName);
  }
  config.socket_mode = o.mode(Option::kSocketMode);
  config.group_name = o.text(Option::kGroup);
  config.group = find_group(config.group_name);
  if (!config.group_name.empty() && !config.group && warnings != nullptr) {
    warnings->push_back(cat("group '", config.group_name,
                            "' does not exist: only root and arena owners may use hugepind, and new arenas are 0600"));
  }
  config.max_connections = static_cast<int>(o.integer(Option::kMaxConnections));
  config.max_connections_per_uid = static_cast<int>(o.integer(Option::kMaxConnectionsPerUid));
  config.reserved_connections = static_cast<int>(o.integer(Option::kReservedConnections));
  config.request_timeout_ns = o.duration_ns(Option::kRequestTimeout);
  config.max_request_bytes = o.size(Option::kMaxRequestBytes);
  config.arena_prefix = o.text(Option::kArenaPrefix);
  config.reap_interval_ns = o.duration_ns(Option::kReapInterval);
  config.retention_ns = o.duration_ns(Option::kRetention);
  config.remove_stale = o.flag(Option::kRemoveStale);
  config.stale_grace_ns = o.duration_ns(Option::kStaleGrace);
  config.teardown_on_stop = o.flag(Option::kTeardownOnStop);
  config.metrics_dir = o.text(Option::kMetricsDir);
  config.metrics_interval_ns = o.duration_ns(Option::kMetricsInterval);
  config.arena.hugetlbfs_dir = o.text(Option::kHugetlbfsDir);
  config.arena.shm_dir = o.text(Option::kShmDir);
  config.arena.group = config.group;
  config.arena.mode = 0600;
  const std::string& level = o.text(Option::kLog);
  config.log_level = !o.is_set(Option::kLog) ? log::Level::kInfo
                     : level == "quiet"      ? log::Level::kQuiet
                     : level == "warn"       ? log::Level::kWarn
                                             : log::Level::kInfo;
  for (auto [id, value] : {std::pair{Option::kReapInterval, config.reap_interval_ns},
                           std::pair{Option::kMetricsInterval, config.metrics_interval_ns},
                           std::pair{Option::kRequestTimeout, config.request_timeout_ns}}) {
    if (value == 0) throw Error(cat(option_spec(id).variable, " is 0: give a duration above zero"));
  }
  if (config.max_request_bytes < 64) {
    throw Error(cat("HUGEPIN_MAX_REQUEST_BYTES is ", config.max_request_bytes, ": give at least 64 bytes"));
  }
  return config;
}

std::vector<std::string> effective_lines(const LoadedOptions& loaded) {
  std::vector<std::string> lines;
  for (const Setting& setting : loaded.settings) {
    std::string value = setting.value.empty() ? "(unset)" : setting.value;
    std::string origin = setting.origin;
    if (setting.spec->id == Option::kLog && origin == "default") {
      value = "info";  // resolve_config: hugepind logs what it does unless told otherwise
      origin = "hugepind's default";
    }
    lines.push_back(cat(config_key(*setting.spec), " = ", value, " (", origin, ")"));
  }
  return lines;
}

}  // namespace hugepin::daemon
