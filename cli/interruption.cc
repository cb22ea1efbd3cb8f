#include "cli/interruption.h"

#include <signal.h>
#include <string.h>

#include <atomic>

#include "base/error.h"

namespace hugepin::cli {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

std::atomic<int> g_caught{0};
struct sigaction g_previous[3];

void on_signal(int number) {
  g_caught.store(number, std::memory_order_relaxed);
  // The next one ends the process as usual.
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(number, &fallback, nullptr);
}

}  // namespace

Interruption::Interruption() {
  g_caught.store(0, std::memory_order_relaxed);
  struct sigaction action {};
  action.sa_handler = on_signal;
  action.sa_flags = SA_RESTART;  // system calls in flight go on; the flag is looked at between steps
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &action, &g_previous[i]);
}

Interruption::~Interruption() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
}

int Interruption::signal() const { return g_caught.load(std::memory_order_relaxed); }

void Interruption::check(std::string_view doing) const {
  const int number = signal();
  if (number == 0) return;
  throw Error(cat("interrupted by SIG", sigabbrev_np(number), " while ", doing, ": removing what it made"), EINTR);
}

}  // namespace hugepin::cli
