// hugepind's configuration: the INI syntax, bad lines named by file:line, the precedence of flag
// over environment over file over default, the [pool] section.
#include "daemon/config.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <cctype>
#include <fstream>
#include <functional>
#include <map>

#include "base/duration.h"
#include "base/error.h"
#include "daemon/config_file.h"
#include "daemon/pool_config.h"
#include "tests/support/temp_dir.h"

namespace hugepin::daemon {
namespace {

OptionSource map_source(const std::map<std::string, std::string>& values) {
  return [&values](const char* variable) -> const char* {
    auto it = values.find(variable);
    return it == values.end() ? nullptr : it->second.c_str();
  };
}

std::string write_file(const test::TempDir& dir, const std::string& text) {
  const std::string path = dir.path() + "/hugepind.conf";
  std::ofstream(path) << text;
  return path;
}

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

const Setting& setting(const LoadedOptions& loaded, Option id) {
  for (const Setting& s : loaded.settings) {
    if (s.spec->id == id) return s;
  }
  throw Error("no such setting");
}

}  // namespace

TEST_CASE("INI lines: comments, optional sections, white space, empty values") {
  ConfigFile file = parse_config_text(
      "# a comment\n"
      "  ; another\n"
      "\n"
      "retention = 24h\n"
      "[daemon]\n"
      "  remove_stale=yes  \r\n"
      "metrics_dir =\n"
      "[pool]\n"
      "2M.node0 = 4096\n",
      "/etc/x.conf");
  REQUIRE(file.lines.size() == 4);
  CHECK(file.lines[0].section == "daemon");
  CHECK(file.lines[0].key == "retention");
  CHECK(file.lines[0].value == "24h");
  CHECK(file.lines[0].line == 4);
  CHECK(file.lines[1].key == "remove_stale");
  CHECK(file.lines[1].value == "yes");
  CHECK(file.lines[2].value.empty());
  CHECK(file.lines[3].section == "pool");
  CHECK(file.where(file.lines[3]) == "/etc/x.conf:9");
}

TEST_CASE("a bad line is an error naming the file and the line") {
  CHECK(error_of([] { parse_config_text("retention = 1h\nnonsense\n", "/etc/x.conf"); })
            .find("/etc/x.conf:2: expected 'key = value'") == 0);
  CHECK(error_of([] { parse_config_text("[deamon]\n", "f"); }).find("f:1: unknown section [deamon]") == 0);
  CHECK(error_of([] { parse_config_text("[daemon\n", "f"); }).find("f:1: a section header ends with ']'") == 0);
  CHECK(error_of([] { parse_config_text(" = 3\n", "f"); }).find("f:1: the key before '=' is empty") == 0);
  CHECK(error_of([] { parse_config_text("a = 1\n\na = 2\n", "f"); }).find("f:3: 'a' is given twice in [daemon]") == 0);
}

TEST_CASE("flag over environment over file over default, each setting saying where it came from") {
  test::TempDir dir;
  const std::string path = write_file(dir,
                                      "retention = 1h\n"
                                      "reap_interval = 7s\n"
                                      "stale_grace = 5m\n"
                                      "remove_stale = yes\n");
  std::map<std::string, std::string> env{{"HUGEPIN_CONFIG", path}, {"HUGEPIN_RETENTION", "2h"},
                                         {"HUGEPIN_REAP_INTERVAL", "3s"}};
  FlagValues flags{{"HUGEPIN_RETENTION", "3h"}};
  LoadedOptions loaded = load_options(real_os(), flags, map_source(env));
  CHECK(loaded.file.found);
  CHECK(loaded.options.duration_ns(Option::kRetention) == 3 * 3600 * kNanosPerSecond);      // flag
  CHECK(loaded.options.duration_ns(Option::kReapInterval) == 3 * kNanosPerSecond);          // environment
  CHECK(loaded.options.duration_ns(Option::kStaleGrace) == 300 * kNanosPerSecond);         // file
  CHECK(loaded.options.duration_ns(Option::kMetricsInterval) == 15 * kNanosPerSecond);     // default
  CHECK(loaded.options.flag(Option::kRemoveStale));
  CHECK(setting(loaded, Option::kRetention).origin == "flag --retention");
  CHECK(setting(loaded, Option::kReapInterval).origin == "environment");
  CHECK(setting(loaded, Option::kStaleGrace).origin == path + ":3");
  CHECK(setting(loaded, Option::kMetricsInterval).origin == "default");
  bool logged_retention = false;
  for (const std::string& line : effective_lines(loaded)) {
    if (line == "retention = 3h (flag --retention)") logged_retention = true;
  }
  CHECK(logged_retention);
}

TEST_CASE("bad values stop the daemon, named by where they came from") {
  test::TempDir dir;
  std::map<std::string, std::string> env{{"HUGEPIN_CONFIG", write_file(dir, "\nretention = 2hh\n")}};
  CHECK(error_of([&] { load_options(real_os(), {}, map_source(env)); })
            .find(dir.path() + "/hugepind.conf:2: retention = '2hh' is not a duration") == 0);

  std::map<std::string, std::string> bad_env{{"HUGEPIN_CONFIG", write_file(dir, "")}, {"HUGEPIN_SOCKET_MODE", "999"}};
  CHECK(error_of([&] { load_options(real_os(), {}, map_source(bad_env)); })
            .find("HUGEPIN_SOCKET_MODE='999' is not an octal mode") == 0);

  std::map<std::string, std::string> ok_env{{"HUGEPIN_CONFIG", write_file(dir, "")}};
  CHECK(error_of([&] { load_options(real_os(), {{"HUGEPIN_MAX_CONNECTIONS", "0"}}, map_source(ok_env)); })
            .find("--max-connections '0' is not a whole number from 1 to 65536") == 0);
  CHECK(error_of([&] { load_options(real_os(), {{"HUGEPIN_MIN_BYTES", "1G"}}, map_source(ok_env)); })
            .find("HUGEPIN_MIN_BYTES is not a hugepind option") != std::string::npos);
}

TEST_CASE("unknown keys, shim keys and 'config' in the file are errors") {
  test::TempDir dir;
  for (auto [text, message] : std::map<std::string, std::string>{
           {"retension = 1h\n", ":1: unknown key 'retension'"},
           {"min_bytes = 1G\n", ":1: unknown key 'min_bytes'"},
           {"config = /x\n", ":1: 'config' cannot be set"},
           {"pool = 2M=1\n", ":1: set pool pages in the [pool] section"}}) {
    std::map<std::string, std::string> env{{"HUGEPIN_CONFIG", write_file(dir, text)}};
    CAPTURE(text);
    CHECK(error_of([&] { load_options(real_os(), {}, map_source(env)); }).find(message) != std::string::npos);
  }
}

TEST_CASE("a missing default file means defaults; a missing named file is an error") {
  std::map<std::string, std::string> env{{"HUGEPIN_CONFIG", "/nonexistent/hugepind.conf"}};
  CHECK(error_of([&] { load_options(real_os(), {}, map_source(env)); })
            .find("cannot open configuration file /nonexistent/hugepind.conf") == 0);
  std::map<std::string, std::string> none;
  // The default path: on this machine it may or may not exist; when it does not, no error.
  if (access("/etc/hugepin/hugepind.conf", F_OK) != 0) {
    LoadedOptions loaded = load_options(real_os(), {}, map_source(none));
    CHECK_FALSE(loaded.file.found);
    CHECK(loaded.options.duration_ns(Option::kRetention) == 0);
  }
}

TEST_CASE("[pool] lines become HUGEPIN_POOL; bad ones are named by line; the environment replaces them") {
  test::TempDir dir;
  std::map<std::string, std::string> env{
      {"HUGEPIN_CONFIG", write_file(dir, "[pool]\n2M.node0 = 4096\n1G = 8\n[daemon]\nretention = 1h\n")}};
  LoadedOptions loaded = load_options(real_os(), {}, map_source(env));
  REQUIRE(loaded.pool.size() == 2);
  CHECK(loaded.pool[0].page_size == 2 * 1024 * 1024);
  CHECK(loaded.pool[0].node == 0);
  CHECK(loaded.pool[0].pages == 4096);
  CHECK_FALSE(loaded.pool[1].node.has_value());
  CHECK(loaded.options.text(Option::kPool) == "2M.node0=4096,1G=8");
  CHECK(setting(loaded, Option::kPool).origin == dir.path() + "/hugepind.conf:2");

  env["HUGEPIN_POOL"] = "2M.node1=16";
  loaded = load_options(real_os(), {}, map_source(env));
  REQUIRE(loaded.pool.size() == 1);
  CHECK(loaded.pool[0].node == 1);

  env.erase("HUGEPIN_POOL");
  env["HUGEPIN_CONFIG"] = write_file(dir, "[pool]\n2M.node0 = 1\n3M = 2\n");
  CHECK(error_of([&] { load_options(real_os(), {}, map_source(env)); })
            .find(":3: pool entry '3M': '3M' is not a hugepage size") != std::string::npos);
  env["HUGEPIN_CONFIG"] = write_file(dir, "[pool]\n2M.node0 = 1\n2M = 2\n");
  CHECK(error_of([&] { load_options(real_os(), {}, map_source(env)); }).find(":3: pool entry") != std::string::npos);
}

TEST_CASE("pool entries parse and refuse what they cannot be") {
  CHECK(format_pool_list(parse_pool_list(" 2M.node0=4096 , 1G.node1=2,")) == "2M.node0=4096,1G.node1=2");
  for (const char* bad : {"2M", "2M.n0=1", "2M.node-1=1", "2M=many", "4K=1", "2M=1,2M.node0=1", "1G.node0=1,1G.node0=2"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_pool_list(bad), Error);
  }
}

TEST_CASE("the socket defaults to the runtime directory; a missing group is a warning") {
  test::TempDir dir;
  std::map<std::string, std::string> env{{"HUGEPIN_CONFIG", write_file(dir, "group = no-such-group-hugepin\n")}};
  LoadedOptions loaded = load_options(real_os(), {}, map_source(env));
  std::vector<std::string> warnings;
  DaemonConfig config = resolve_config(loaded, "/run/a:/run/b", &warnings);
  CHECK(config.socket_path == "/run/a/hugepind.sock");
  CHECK(resolve_config(loaded, nullptr, nullptr).socket_path == "/run/hugepin/hugepind.sock");
  CHECK_FALSE(config.group.has_value());
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("group 'no-such-group-hugepin' does not exist") == 0);
  CHECK(config.log_level == log::Level::kInfo);  // hugepind's default when HUGEPIN_LOG is unset

  env["HUGEPIN_CONFIG"] = write_file(dir, "group = root\nsocket = /tmp/s.sock\nreap_interval = 0\n");
  loaded = load_options(real_os(), {}, map_source(env));
  CHECK(error_of([&] { resolve_config(loaded, nullptr, nullptr); }).find("HUGEPIN_REAP_INTERVAL is 0") == 0);
  env["HUGEPIN_CONFIG"] = write_file(dir, "group = root\nsocket = /tmp/s.sock\n");
  config = resolve_config(load_options(real_os(), {}, map_source(env)), "/run/x", nullptr);
  CHECK(config.socket_path == "/tmp/s.sock");
  CHECK(config.group == 0);
  CHECK(config.arena.group == 0);
}

}  // namespace hugepin::daemon

namespace hugepin::daemon {

// The shipped example documents every key with its default, and parses once uncommented.
TEST_CASE("systemd/hugepind.conf.example names every option with its default, and parses") {
  std::ifstream in(std::string(HUGEPIN_SOURCE_DIR) + "/systemd/hugepind.conf.example");
  REQUIRE(in.good());
  std::string text;
  std::map<std::string, std::string> documented;
  for (std::string line; std::getline(in, line);) {
    // "# key = value" lines are the settings, commented out.
    const size_t equals = line.find(" =");
    const std::string key = equals == std::string::npos ? std::string() : line.substr(2, equals - 2);
    const bool setting = find_option_by_key(key) != nullptr || (!key.empty() && std::isdigit(key[0]) != 0);
    if (line.rfind("# ", 0) == 0 && setting && line.find(' ', 2) == equals) {
      const std::string value = line.size() > equals + 3 ? line.substr(equals + 3) : std::string();
      documented[key] = value;
      line = line.substr(2);
    }
    text += line + "\n";
  }
  for (const OptionSpec& spec : option_table()) {
    if ((spec.scope & kDaemonScope) == 0 || spec.id == Option::kConfig || spec.id == Option::kPool) continue;
    const std::string key = config_key(spec);
    CAPTURE(key);
    REQUIRE(documented.count(key) == 1);
    const std::string shown = documented[key];
    if (spec.type == OptionType::kBool) {
      CHECK(option_value_problem(spec, shown).empty());
      CHECK((shown == "yes") == (spec.default_value == "1"));
    } else if (spec.id == Option::kLog) {
      CHECK(shown == "info");  // hugepind's own default
    } else {
      CHECK(shown == spec.default_value);
    }
  }
  test::TempDir dir;
  std::map<std::string, std::string> env{{"HUGEPIN_CONFIG", write_file(dir, text)}};
  LoadedOptions loaded = load_options(real_os(), {}, map_source(env));
  CHECK(loaded.pool.size() == 3);
}

}  // namespace hugepin::daemon
