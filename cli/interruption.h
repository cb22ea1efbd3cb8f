// Ctrl-C, SIGTERM and SIGHUP for a command that must clean up after itself (a benchmark's arena in
// /dev/shm and its file on disk): while an Interruption lives, those signals only set a flag,
// which the command checks at its next step and turns into an Error, so that the destructors that
// remove what it made run. A second signal takes the default action (the user insists).
//
// Thread-safety: one Interruption at a time per process; check() from any thread.
#pragma once

#include <string_view>

namespace hugepin::cli {

class Interruption {
 public:
  Interruption();   // catches SIGINT, SIGTERM and SIGHUP
  ~Interruption();  // puts back what was there before
  Interruption(const Interruption&) = delete;
  Interruption& operator=(const Interruption&) = delete;

  // The signal caught so far, 0 when none.
  int signal() const;
  // Throws Error ("interrupted by SIGINT while <doing>: removing what it made") once a signal came.
  void check(std::string_view doing) const;
};

}  // namespace hugepin::cli
