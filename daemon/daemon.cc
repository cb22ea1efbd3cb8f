#include "daemon/daemon.h"

#include <unistd.h>

#include <iostream>

#include "base/error.h"
#include "base/log.h"
#include "daemon/daemon_impl.h"

namespace hugepin::daemon {

int run_daemon(Os& os, const FlagValues& flags, const OptionSource& environment) {
  log::set_program("hugepind");
  Notifier notifier = Notifier::from_environment(os, environment, getpid());
  LoadedOptions loaded;
  DaemonConfig config;
  try {
    loaded = load_options(os, flags, environment);
    std::vector<std::string> warnings;
    config = resolve_config(loaded, environment("RUNTIME_DIRECTORY"), &warnings);
    log::set_level(config.log_level);
    for (const std::string& warning : warnings) log::warn(warning);
  } catch (const Error& error) {
    std::cerr << "hugepind: error: " << error.what() << "\n";
    notifier.send(cat("STATUS=bad configuration: ", error.what()));
    return 2;
  }
  try {
    detail::Daemon daemon(os, flags, environment, std::move(loaded), std::move(config), std::move(notifier));
    return daemon.run();
  } catch (const std::exception& error) {
    std::cerr << "hugepind: error: " << error.what() << "\n";
    return 1;
  }
}

}  // namespace hugepin::daemon
