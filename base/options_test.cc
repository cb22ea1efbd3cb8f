#include "base/options.h"

#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>

#include "base/size.h"

namespace hugepin {
namespace {

// An option source backed by a map, as a test environment.
OptionSource map_source(const std::map<std::string, std::string>& values) {
  return [&values](const char* variable) -> const char* {
    auto it = values.find(variable);
    return it == values.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace

TEST_CASE("every option has a HUGEPIN_ variable, a doc line and a default that parses") {
  std::set<std::string_view> variables;
  for (const OptionSpec& spec : option_table()) {
    CHECK(spec.variable.substr(0, 8) == "HUGEPIN_");
    CHECK(variables.insert(spec.variable).second);
    CHECK_FALSE(spec.doc.empty());
    CHECK(spec.doc.find('\n') == std::string_view::npos);
  }
  Options defaults;  // throws when a default does not parse
  CHECK(defaults.size(Option::kMinBytes) == 64 * kMiB);
  CHECK(defaults.text(Option::kPageSize) == "auto");
  CHECK(defaults.text(Option::kLog) == "warn");
  CHECK(defaults.text(Option::kShmDir) == "/dev/shm");
  CHECK_FALSE(defaults.flag(Option::kStrict));
  CHECK_FALSE(defaults.is_set(Option::kRank));
  CHECK(defaults.text(Option::kArena).empty());
}

TEST_CASE("values of every type parse from the source") {
  std::map<std::string, std::string> env{{"HUGEPIN_MIN_BYTES", "1G"},     {"HUGEPIN_ARENA", "kv"},
                                         {"HUGEPIN_RANK", "3"},           {"HUGEPIN_PAGESIZE", "1g"},
                                         {"HUGEPIN_STRICT", "yes"},       {"HUGEPIN_LOG", "INFO"},
                                         {"HUGEPIN_DISABLE", "off"}};
  std::vector<std::string> problems;
  Options options = Options::parse(map_source(env), &problems);
  CHECK(problems.empty());
  CHECK(options.size(Option::kMinBytes) == kGiB);
  CHECK(options.text(Option::kArena) == "kv");
  CHECK(options.integer(Option::kRank) == 3);
  CHECK(options.text(Option::kPageSize) == "1G");  // normalized to the table's spelling
  CHECK(options.flag(Option::kStrict));
  CHECK(options.text(Option::kLog) == "info");
  CHECK_FALSE(options.flag(Option::kDisable));
  CHECK(options.is_set(Option::kDisable));
  CHECK_FALSE(options.is_set(Option::kSysroot));
}

TEST_CASE("a bad value keeps the default and yields one line naming the variable and the value") {
  std::map<std::string, std::string> env{{"HUGEPIN_MIN_BYTES", "12Q"},
                                         {"HUGEPIN_RANK", "-1"},
                                         {"HUGEPIN_PAGESIZE", "3M"},
                                         {"HUGEPIN_STRICT", "maybe"},
                                         {"HUGEPIN_LOG", "loud"}};
  std::vector<std::string> problems;
  Options options = Options::parse(map_source(env), &problems);
  REQUIRE(problems.size() == 5);
  CHECK(problems[0] == "HUGEPIN_MIN_BYTES='12Q' is not a size (examples: 64M, 1G, 1048576): using the default 64M");
  CHECK(problems[1] == "HUGEPIN_RANK='-1' is not a whole number from 0 to 65535: using the default (unset)");
  CHECK(problems[2] == "HUGEPIN_PAGESIZE='3M' is not one of auto|2M|1G: using the default auto");
  CHECK(problems[3].find("HUGEPIN_STRICT='maybe' is not a boolean") == 0);
  CHECK(problems[4].find("HUGEPIN_LOG='loud' is not one of quiet|warn|info") == 0);
  CHECK(options.size(Option::kMinBytes) == 64 * kMiB);
  CHECK_FALSE(options.is_set(Option::kMinBytes));
  CHECK_FALSE(options.is_set(Option::kRank));
  CHECK(options.text(Option::kPageSize) == "auto");
  CHECK_FALSE(options.flag(Option::kStrict));
  for (const std::string& line : problems) CHECK(line.find('\n') == std::string::npos);
}

TEST_CASE("sizes are overflow-checked and an empty value counts as unset") {
  std::map<std::string, std::string> env{{"HUGEPIN_MIN_BYTES", "99999999999999999999"}, {"HUGEPIN_ARENA", ""}};
  std::vector<std::string> problems;
  Options options = Options::parse(map_source(env), &problems);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("HUGEPIN_MIN_BYTES='99999999999999999999' is not a size") == 0);
  CHECK_FALSE(options.is_set(Option::kArena));
  CHECK(Options::parse(map_source({{"HUGEPIN_MIN_BYTES", "16384P"}})).size(Option::kMinBytes) == 64 * kMiB);
  CHECK(Options::parse(map_source({{"HUGEPIN_MIN_BYTES", "17179869184G"}})).size(Option::kMinBytes) == 64 * kMiB);
}

TEST_CASE("getters refuse an option of another type") {
  Options options;
  CHECK_THROWS(options.size(Option::kArena));
  CHECK_THROWS(options.flag(Option::kMinBytes));
  CHECK_THROWS(options.text(Option::kStrict));
}

TEST_CASE("effective_options shows the raw text, the value in force and any problem") {
  std::map<std::string, std::string> env{{"HUGEPIN_MIN_BYTES", "128M"}, {"HUGEPIN_LOG", "shout"}};
  std::vector<EffectiveOption> rows = effective_options(map_source(env));
  REQUIRE(rows.size() == option_table().size());
  CHECK(rows[0].spec->variable == "HUGEPIN_MIN_BYTES");
  CHECK(rows[0].present);
  CHECK(rows[0].effective == "128M");
  CHECK(rows[0].problem.empty());
  const EffectiveOption& log = rows[static_cast<size_t>(Option::kLog)];
  CHECK(log.raw == "shout");
  CHECK(log.effective == "warn");
  CHECK_FALSE(log.problem.empty());
  const EffectiveOption& arena = rows[static_cast<size_t>(Option::kArena)];
  CHECK_FALSE(arena.present);
  CHECK(arena.effective.empty());
}

TEST_CASE("durations and modes parse; config keys and flags follow the variable") {
  std::map<std::string, std::string> env{{"HUGEPIN_RETENTION", "24h"}, {"HUGEPIN_SOCKET_MODE", "0640"},
                                         {"HUGEPIN_REAP_INTERVAL", "250ms"}};
  std::vector<std::string> problems;
  Options options = Options::parse(map_source(env), &problems);
  CHECK(problems.empty());
  CHECK(options.duration_ns(Option::kRetention) == 24LL * 3600 * 1'000'000'000);
  CHECK(options.duration_ns(Option::kReapInterval) == 250'000'000);
  CHECK(options.mode(Option::kSocketMode) == 0640);
  CHECK(Options().mode(Option::kSocketMode) == 0660);
  CHECK(Options().duration_ns(Option::kRetention) == 0);

  const OptionSpec& stale = option_spec(Option::kRemoveStale);
  CHECK(config_key(stale) == "remove_stale");
  CHECK(flag_name(stale) == "--remove-stale");
  CHECK(find_option_by_key("remove_stale") == &stale);
  CHECK(find_option_by_key("REMOVE_STALE") == nullptr);
  CHECK(find_option_by_key("nonsense") == nullptr);

  CHECK(option_value_problem(option_spec(Option::kSocketMode), "0999").find("is not an octal mode") == 0);
  CHECK(option_value_problem(option_spec(Option::kSocketMode), "017777") != "");
  CHECK(option_value_problem(option_spec(Option::kRetention), "2hh").find("is not a duration") == 0);
  CHECK(option_value_problem(option_spec(Option::kRetention), "-1s") != "");
  CHECK(option_value_problem(option_spec(Option::kRetention), "90s").empty());
}

TEST_CASE("a scope parses only its own options: the shim ignores hugepind's") {
  std::map<std::string, std::string> env{{"HUGEPIN_RETENTION", "soon"}, {"HUGEPIN_MIN_BYTES", "1G"}};
  std::vector<std::string> problems;
  Options shim = Options::parse(map_source(env), &problems, kShimScope);
  CHECK(problems.empty());
  CHECK(shim.size(Option::kMinBytes) == kGiB);
  CHECK_FALSE(shim.is_set(Option::kRetention));
  Options daemon = Options::parse(map_source(env), &problems, kDaemonScope);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("HUGEPIN_RETENTION='soon' is not a duration") == 0);
  CHECK_FALSE(daemon.is_set(Option::kMinBytes));
  for (const EffectiveOption& row : effective_options(map_source(env), kShimScope)) {
    CHECK((row.spec->scope & kShimScope) != 0);
  }
}

}  // namespace hugepin
