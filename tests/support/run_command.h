// Runs a command line through the shell and collects what it printed, for tests of the CLI.
#pragma once

#include <string>

namespace hugepin::test {

struct CommandResult {
  int status = -1;  // exit status, or -1 when killed by a signal
  std::string out;  // stdout and stderr together
};

CommandResult run_command(const std::string& command_line);

// Runs the hugepin binary of this build with `args`.
CommandResult run_hugepin(const std::string& args);

}  // namespace hugepin::test
