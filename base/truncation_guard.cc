#include "base/truncation_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>

namespace hugepin {
namespace {

// One guarded range. `end` is stored last (release) when a slot is filled and cleared first when
// it is emptied, so the handler, which reads it first (acquire), never sees a half-filled slot.
struct Slot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> truncated{false};
  std::atomic<bool> taken{false};
};

Slot g_slots[TruncationGuard::kSlots];
struct sigaction g_previous {};
uintptr_t g_page_size = 4096;
std::once_flag g_installed;

// Hands the signal on as if this handler were not there.
void pass_on(int signal, siginfo_t* info, void* context) {
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(signal, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(signal);
    return;
  }
  // The default action: restore it; the faulting access runs again, faults again and takes it.
  sigaction(SIGBUS, &g_previous, nullptr);
}

void on_sigbus(int signal, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& slot : g_slots) {
    // Acquire pairs with the release store of `end` in the constructor.
    const uintptr_t end = slot.end.load(std::memory_order_acquire);
    const uintptr_t begin = slot.begin.load(std::memory_order_relaxed);
    if (end == 0 || address < begin || address >= end) continue;
    const uintptr_t page = address & ~(g_page_size - 1);
    // Past the file's end every page faults: replace them all at once. mmap is a plain system
    // call here (not formally async-signal-safe, but no lock is taken on Linux).
    void* placed = mmap(reinterpret_cast<void*>(page), end - page, PROT_READ | PROT_WRITE,
                        MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (placed == MAP_FAILED) break;
    slot.truncated.store(true, std::memory_order_release);
    return;
  }
  pass_on(signal, info, context);
}

void install_handler() {
  g_page_size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGBUS, &action, &g_previous);
}

}  // namespace

TruncationGuard::TruncationGuard(void* data, size_t length) {
  std::call_once(g_installed, install_handler);
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (!g_slots[i].taken.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) continue;
    g_slots[i].truncated.store(false, std::memory_order_relaxed);
    g_slots[i].begin.store(reinterpret_cast<uintptr_t>(data), std::memory_order_relaxed);
    // Release pairs with the acquire load in on_sigbus.
    g_slots[i].end.store(reinterpret_cast<uintptr_t>(data) + length, std::memory_order_release);
    slot_ = i;
    return;
  }
}

TruncationGuard::~TruncationGuard() { release(); }

TruncationGuard::TruncationGuard(TruncationGuard&& other) noexcept : slot_(std::exchange(other.slot_, -1)) {}

TruncationGuard& TruncationGuard::operator=(TruncationGuard&& other) noexcept {
  if (this != &other) {
    release();
    slot_ = std::exchange(other.slot_, -1);
  }
  return *this;
}

bool TruncationGuard::truncated() const {
  // Acquire pairs with the release store in on_sigbus.
  return slot_ >= 0 && g_slots[slot_].truncated.load(std::memory_order_acquire);
}

void TruncationGuard::release() {
  if (slot_ < 0) return;
  g_slots[slot_].end.store(0, std::memory_order_release);
  g_slots[slot_].taken.store(false, std::memory_order_release);
  slot_ = -1;
}

}  // namespace hugepin
