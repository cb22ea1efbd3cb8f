// hugepind: the daemon. Thin: every daemon option of the HUGEPIN_* table as a flag, then
// daemon::run_daemon (daemon/daemon.h).
//
// Exit status: 0 after a clean stop (SIGTERM, SIGINT), 1 when it could not start or failed, 2 for
// bad usage or a configuration that does not parse. Errors are one line on stderr.
#include <cctype>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>

#include <CLI/CLI.hpp>

#include "base/error.h"
#include "base/options.h"
#include "base/os.h"
#include "daemon/config.h"
#include "daemon/daemon.h"

namespace {

constexpr const char* kFooter = R"(Every option is also a line of the configuration file (the flag without its
dashes, '_' for '-': `retention = 24h` in the [daemon] section) and a HUGEPIN_*
environment variable (HUGEPIN_RETENTION=24h). A flag wins over the environment,
which wins over the file, which wins over the default. The [pool] section holds
the pages `hugepin pool apply` reserves at boot (`2M.node0 = 4096`).

Signals: SIGTERM or SIGINT stops (arenas are kept unless teardown_on_stop is
set); SIGHUP reloads the configuration (all but socket and socket_mode).

hugepin daemon status|list|create|destroy talks to a running hugepind.)";

std::string option_help(const hugepin::OptionSpec& spec) {
  std::string help(spec.doc);
  help += " [";
  help += spec.variable;
  if (spec.id == hugepin::Option::kLog) {
    help += ", hugepind's default info";  // daemon/config.h: hugepind logs what it does unless told otherwise
  } else if (!spec.default_value.empty()) {
    help += ", default ";
    help += spec.default_value;
  }
  help += "]";
  return help;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hugepin;
  CLI::App app{"hugepind: keeps hugepage arenas (and the KV data in them) alive across engine and worker restarts, "
               "adopts them at start, reaps dead workers, reports to systemd"};
  app.name("hugepind");
  app.set_version_flag("--version", std::string(HUGEPIN_VERSION));
  app.footer(kFooter);
  bool check_config = false;
  app.add_flag("--check-config", check_config, "Load the configuration, print the effective options and exit");
  std::map<std::string, std::string> values;
  for (const OptionSpec& spec : option_table()) {
    if ((spec.scope & kDaemonScope) == 0) continue;
    std::string name = flag_name(spec);
    std::string type = std::string(type_name(spec.type));
    for (char& c : type) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    app.add_option(name, values[std::string(spec.variable)], option_help(spec))->type_name(type);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForVersion& version) {
    return app.exit(version);
  } catch (const CLI::ParseError& error) {
    std::cerr << "hugepind: error: " << error.what() << " (see hugepind --help)\n";
    return 2;
  }
  daemon::FlagValues flags;
  for (auto& [variable, value] : values) {
    if (!value.empty()) flags[variable] = value;
  }
  if (check_config) {
    try {
      daemon::LoadedOptions loaded = daemon::load_options(real_os(), flags, environment_source());
      std::vector<std::string> warnings;
      daemon::resolve_config(loaded, std::getenv("RUNTIME_DIRECTORY"), &warnings);
      for (const std::string& warning : warnings) std::cerr << "hugepind: warning: " << warning << "\n";
      for (const std::string& line : daemon::effective_lines(loaded)) std::cout << line << "\n";
      return 0;
    } catch (const hugepin::Error& error) {
      std::cerr << "hugepind: error: " << error.what() << "\n";
      return 2;
    }
  }
  return daemon::run_daemon(real_os(), flags, environment_source());
}
