#include "base/options.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <stdexcept>

#include "base/contract.h"
#include "base/duration.h"
#include "base/error.h"
#include "base/size.h"

namespace hugepin {
namespace {

using enum OptionType;

constexpr unsigned kShim = kShimScope;
constexpr unsigned kDaemon = kDaemonScope;
constexpr unsigned kBoth = kAllScopes;

constexpr std::array<OptionSpec, kOptionCount> kTable{{
    {Option::kMinBytes, "HUGEPIN_MIN_BYTES", "64M", kSize, "", 0, 0,
     "pinned requests of at least this many bytes are served from hugepages; smaller ones go to CUDA", kShim},
    {Option::kArena, "HUGEPIN_ARENA", "", kString, "", 0, 0,
     "serve from this arena's region of the process's rank; unset: one private hugepage mapping per request", kShim},
    {Option::kRank, "HUGEPIN_RANK", "", kInt, "", 0, 65535,
     "the arena region to use; unset: LOCAL_RANK, then RANK, then 0", kShim},
    {Option::kPageSize, "HUGEPIN_PAGESIZE", "auto", kChoice, "auto|2M|1G", 0, 0,
     "page size of private mappings; auto: 1G when that rounds a request up by at most 1/64, else 2M", kShim},
    {Option::kHugetlbfsDir, "HUGEPIN_HUGETLBFS_DIR", "", kString, "", 0, 0,
     "hugetlbfs mount for private mappings and new arenas; unset: the one /proc/mounts lists for the page size", kBoth},
    {Option::kShmDir, "HUGEPIN_SHM_DIR", "/dev/shm", kString, "", 0, 0,
     "where 4 KiB arena regions and the shim's allocation tables are", kBoth},
    {Option::kStrict, "HUGEPIN_STRICT", "0", kBool, "", 0, 0,
     "serve only hugepages on the GPU's NUMA node; anything less goes to CUDA instead", kShim},
    {Option::kLog, "HUGEPIN_LOG", "warn", kChoice, "quiet|warn|info", 0, 0,
     "quiet: nothing; warn: one line per fallback cause; info: also one line per allocation served (hugepind: info when unset)", kBoth},
    {Option::kDisable, "HUGEPIN_DISABLE", "0", kBool, "", 0, 0,
     "pass every call to CUDA unchanged", kShim},
    {Option::kSysroot, "HUGEPIN_SYSROOT", "/", kString, "", 0, 0,
     "read /sys and /proc under this directory (recorded trees, for tests)", kShim},
    {Option::kConfig, "HUGEPIN_CONFIG", "/etc/hugepin/hugepind.conf", kString, "", 0, 0,
     "hugepind's configuration file (INI: [daemon] and [pool] sections); a missing default file means defaults", kDaemon},
    {Option::kSocket, "HUGEPIN_SOCKET", "", kString, "", 0, 0,
     "hugepind's request socket; unset: $RUNTIME_DIRECTORY/hugepind.sock, else /run/hugepin/hugepind.sock", kDaemon},
    {Option::kSocketMode, "HUGEPIN_SOCKET_MODE", "0660", kMode, "", 0, 0,
     "permissions of the request socket (its group is HUGEPIN_GROUP)", kDaemon},
    {Option::kGroup, "HUGEPIN_GROUP", "hugepin", kString, "", 0, 0,
     "members may send every request, and arenas hugepind creates are shared with it (0660); no such group: root and owners only", kDaemon},
    {Option::kMaxConnections, "HUGEPIN_MAX_CONNECTIONS", "256", kInt, "", 1, 65536,
     "clients served at once; more are answered 'busy' and closed", kDaemon},
    {Option::kMaxConnectionsPerUid, "HUGEPIN_MAX_CONNECTIONS_PER_UID", "32", kInt, "", 1, 65536,
     "connections one uid may hold at once (root: only HUGEPIN_MAX_CONNECTIONS); more are answered 'busy'", kDaemon},
    {Option::kReservedConnections, "HUGEPIN_RESERVED_CONNECTIONS", "16", kInt, "", 0, 32768,
     "of HUGEPIN_MAX_CONNECTIONS, kept for root and members of HUGEPIN_GROUP (at most half)", kDaemon},
    {Option::kRequestTimeout, "HUGEPIN_REQUEST_TIMEOUT", "10s", kDuration, "", 0, 0,
     "a connection that sends no complete request for this long is closed", kDaemon},
    {Option::kMaxRequestBytes, "HUGEPIN_MAX_REQUEST_BYTES", "64K", kSize, "", 0, 0,
     "longest request line; a longer one is answered with an error and the connection closed", kDaemon},
    {Option::kArenaPrefix, "HUGEPIN_ARENA_PREFIX", "", kString, "", 0, 0,
     "manage only arenas whose names start with this (adoption, reaping, stale files); unset: every arena", kDaemon},
    {Option::kReapInterval, "HUGEPIN_REAP_INTERVAL", "5s", kDuration, "", 0, 0,
     "how often dead workers are marked, retention checked and stale files looked for", kDaemon},
    {Option::kRetention, "HUGEPIN_RETENTION", "0", kDuration, "", 0, 0,
     "destroy an arena that has had no live worker, scheduler, creator or locked region for this long; 0: never", kDaemon},
    {Option::kRemoveStale, "HUGEPIN_REMOVE_STALE", "0", kBool, "", 0, 0,
     "remove stale files (arena files that belong to no arena) older than HUGEPIN_STALE_GRACE", kDaemon},
    {Option::kStaleGrace, "HUGEPIN_STALE_GRACE", "1h", kDuration, "", 0, 0,
     "files younger than this are never removed or quarantined: an arena may be being created", kDaemon},
    {Option::kTeardownOnStop, "HUGEPIN_TEARDOWN_ON_STOP", "0", kBool, "", 0, 0,
     "destroy every managed arena when hugepind stops; off: arenas and their data outlive the daemon", kDaemon},
    {Option::kMetricsDir, "HUGEPIN_METRICS_DIR", "", kString, "", 0, 0,
     "write hugepin.prom here for node_exporter's textfile collector; unset: no metrics file", kDaemon},
    {Option::kMetricsInterval, "HUGEPIN_METRICS_INTERVAL", "15s", kDuration, "", 0, 0,
     "how often the metrics file is rewritten", kDaemon},
    {Option::kPool, "HUGEPIN_POOL", "", kString, "", 0, 0,
     "pages to reserve at boot: comma-separated SIZE.nodeN=PAGES or SIZE=PAGES (the [pool] section)", kDaemon},
    {Option::kPoolAllowShortfall, "HUGEPIN_POOL_ALLOW_SHORTFALL", "0", kBool, "", 0, 0,
     "hugepin pool apply exits 0 even when the kernel gives fewer pages than asked", kDaemon},
}};

constexpr bool table_in_id_order() {
  for (size_t i = 0; i < kTable.size(); ++i) {
    if (static_cast<size_t>(kTable[i].id) != i) return false;
  }
  return true;
}
static_assert(table_in_id_order(), "option table rows must follow the Option enum");

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// The choice of `choices` ("a|b|c") that `text` names, in the table's spelling; "" when none.
std::string_view find_choice(std::string_view choices, std::string_view text) {
  while (!choices.empty()) {
    size_t bar = choices.find('|');
    std::string_view choice = choices.substr(0, bar);
    if (equal_ignoring_case(choice, text)) return choice;
    choices = bar == std::string_view::npos ? std::string_view() : choices.substr(bar + 1);
  }
  return {};
}

std::optional<bool> parse_bool(std::string_view text) {
  for (std::string_view yes : {"1", "true", "yes", "on"}) {
    if (equal_ignoring_case(text, yes)) return true;
  }
  for (std::string_view no : {"0", "false", "no", "off"}) {
    if (equal_ignoring_case(text, no)) return false;
  }
  return std::nullopt;
}

std::optional<uint32_t> parse_mode(std::string_view text) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  uint32_t mode = 0;
  for (char c : text) {
    if (c < '0' || c > '7') return std::nullopt;
    mode = mode * 8 + static_cast<uint32_t>(c - '0');
  }
  if (mode > 07777) return std::nullopt;
  return mode;
}

std::optional<int64_t> parse_int(std::string_view text, int64_t min, int64_t max) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max) return std::nullopt;
  return value;
}

struct Parsed {
  std::string text;
  uint64_t number = 0;
};

// Parses `text` as the option's type; returns nullopt and sets *why when it does not parse.
std::optional<Parsed> parse_value(const OptionSpec& spec, std::string_view text, std::string* why) {
  switch (spec.type) {
    case kSize:
      if (auto bytes = parse_size(text)) return Parsed{std::string(text), *bytes};
      *why = "is not a size (examples: 64M, 1G, 1048576)";
      return std::nullopt;
    case kBool:
      if (auto flag = parse_bool(text)) return Parsed{std::string(text), *flag ? 1u : 0u};
      *why = "is not a boolean (1, 0, true, false, yes, no, on, off)";
      return std::nullopt;
    case kInt:
      if (auto number = parse_int(text, spec.min, spec.max)) {
        return Parsed{std::string(text), static_cast<uint64_t>(*number)};
      }
      *why = cat("is not a whole number from ", spec.min, " to ", spec.max);
      return std::nullopt;
    case kChoice:
      if (std::string_view choice = find_choice(spec.choices, text); !choice.empty()) {
        return Parsed{std::string(choice), 0};
      }
      *why = cat("is not one of ", spec.choices);
      return std::nullopt;
    case kString:
      return Parsed{std::string(text), 0};
    case kDuration:
      if (auto nanos = parse_duration(text)) return Parsed{std::string(text), static_cast<uint64_t>(*nanos)};
      *why = "is not a duration (examples: 0, 500ms, 90s, 5m, 24h, 7d)";
      return std::nullopt;
    case kMode:
      if (auto mode = parse_mode(text)) return Parsed{std::string(text), *mode};
      *why = "is not an octal mode from 0 to 07777 (example: 0660)";
      return std::nullopt;
  }
  *why = "has an unknown type";
  return std::nullopt;
}

// The source's text for `spec`, or "" when unset.
std::string_view source_text(const OptionSource& source, const OptionSpec& spec) {
  // Variables are string literals in the table: null-terminated.
  const char* raw = source(spec.variable.data());
  return raw == nullptr ? std::string_view() : std::string_view(raw);
}

std::string problem_line(const OptionSpec& spec, std::string_view raw, std::string_view why) {
  return cat(spec.variable, "='", raw, "' ", why, ": using the default ",
             spec.default_value.empty() ? std::string("(unset)") : std::string(spec.default_value));
}

}  // namespace

std::span<const OptionSpec> option_table() { return kTable; }

const OptionSpec& option_spec(Option id) { return kTable[static_cast<size_t>(id)]; }

std::string_view type_name(OptionType type) {
  switch (type) {
    case kSize: return "size";
    case kBool: return "bool";
    case kInt: return "int";
    case kString: return "string";
    case kChoice: return "choice";
    case kDuration: return "duration";
    case kMode: return "mode";
  }
  return "unknown";
}

const OptionSpec* find_option_by_key(std::string_view key) {
  for (const OptionSpec& spec : kTable) {
    if (config_key(spec) == key) return &spec;
  }
  return nullptr;
}

std::string config_key(const OptionSpec& spec) {
  constexpr std::string_view kPrefix = "HUGEPIN_";
  std::string key;
  for (char c : spec.variable.substr(kPrefix.size())) {
    key.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return key;
}

std::string flag_name(const OptionSpec& spec) {
  std::string flag = "--" + config_key(spec);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

std::string option_value_problem(const OptionSpec& spec, std::string_view text) {
  std::string why;
  if (parse_value(spec, text, &why)) return "";
  return why;
}

OptionSource environment_source() {
  return [](const char* variable) -> const char* { return std::getenv(variable); };
}

Options::Options() {
  for (const OptionSpec& spec : kTable) {
    Value& value = values_[static_cast<size_t>(spec.id)];
    if (spec.default_value.empty()) continue;
    std::string why;
    std::optional<Parsed> parsed = parse_value(spec, spec.default_value, &why);
    if (!parsed) throw std::logic_error(cat("option table: default of ", spec.variable, " ", why));
    value.text = std::move(parsed->text);
    value.number = parsed->number;
  }
}

Options Options::parse(const OptionSource& source, std::vector<std::string>* problems, unsigned scope) {
  Options options;
  for (const OptionSpec& spec : kTable) {
    if ((spec.scope & scope) == 0) continue;
    std::string_view raw = source_text(source, spec);
    if (raw.empty()) continue;
    std::string why;
    std::optional<Parsed> parsed = parse_value(spec, raw, &why);
    if (!parsed) {
      if (problems != nullptr) problems->push_back(problem_line(spec, raw, why));
      continue;
    }
    Value& value = options.values_[static_cast<size_t>(spec.id)];
    value.text = std::move(parsed->text);
    value.number = parsed->number;
    value.set = true;
  }
  return options;
}

const Options::Value& Options::value(Option id, OptionType type) const {
  const OptionSpec& spec = option_spec(id);
  if (spec.type != type) throw std::logic_error(cat(spec.variable, " is a ", type_name(spec.type), " option"));
  return values_[static_cast<size_t>(id)];
}

uint64_t Options::size(Option id) const { return value(id, kSize).number; }

int64_t Options::duration_ns(Option id) const { return static_cast<int64_t>(value(id, kDuration).number); }

uint32_t Options::mode(Option id) const { return static_cast<uint32_t>(value(id, kMode).number); }

bool Options::flag(Option id) const { return value(id, kBool).number != 0; }

int64_t Options::integer(Option id) const {
  HUGEPIN_REQUIRE(is_set(id) || !option_spec(id).default_value.empty(), option_spec(id).variable, " is unset and has no default");
  return static_cast<int64_t>(value(id, kInt).number);
}

const std::string& Options::text(Option id) const {
  const OptionSpec& spec = option_spec(id);
  return value(id, spec.type == kChoice ? kChoice : kString).text;
}

bool Options::is_set(Option id) const { return values_[static_cast<size_t>(id)].set; }

std::vector<EffectiveOption> effective_options(const OptionSource& source, unsigned scope) {
  std::vector<EffectiveOption> rows;
  for (const OptionSpec& spec : kTable) {
    if ((spec.scope & scope) == 0) continue;
    EffectiveOption row;
    row.spec = &spec;
    row.effective = std::string(spec.default_value);
    std::string_view raw = source_text(source, spec);
    if (!raw.empty()) {
      row.present = true;
      row.raw = std::string(raw);
      std::string why;
      if (std::optional<Parsed> parsed = parse_value(spec, raw, &why)) {
        row.effective = std::move(parsed->text);
      } else {
        row.problem = problem_line(spec, raw, why);
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace hugepin
