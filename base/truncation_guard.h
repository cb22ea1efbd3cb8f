// Surviving a shared file that shrinks under its mapping.
//
// A process maps a control segment that other processes with write access to it can truncate
// (`truncate -s 0 /dev/shm/hugepin.kv`). Touching a page past the new end raises SIGBUS, whose
// default action kills the process: a scheduler would die in the middle of a run, its KV state
// lost. A guarded mapping's SIGBUS is absorbed instead: the pages from the faulting one to the end
// of the mapping are replaced with private zero-filled memory (MAP_FIXED, as Wayland compositors
// do for a client's shrunk buffer), the guard records that it happened, and the access goes on,
// reading zeros. The owner asks truncated() at its next step and stops with a message: nothing it
// read after the truncation is trusted.
//
// The process-wide SIGBUS handler is installed on the first guard; a SIGBUS outside every guarded
// mapping goes to the handler that was there before, or takes the default action as it would have.
// The LD_PRELOAD shim never installs it (it maps no control segment).
//
// Thread-safety: guards may be made and dropped from any thread; the handler reads the slots
// without locks. Move-only.
#pragma once

#include <cstddef>

namespace hugepin {

class TruncationGuard {
 public:
  // At most this many mappings are guarded at once; a guard made beyond it guards nothing.
  static constexpr int kSlots = 1024;

  TruncationGuard() = default;
  // Guards [data, data + length). REQUIRES: a shared file mapping the caller keeps for as long as
  // this guard lives (drop the guard before unmapping); a lifetime, not checked.
  TruncationGuard(void* data, size_t length);
  ~TruncationGuard();
  TruncationGuard(TruncationGuard&& other) noexcept;
  TruncationGuard& operator=(TruncationGuard&& other) noexcept;
  TruncationGuard(const TruncationGuard&) = delete;
  TruncationGuard& operator=(const TruncationGuard&) = delete;

  // True once an access past the file's end was absorbed: the mapping now holds zeros there.
  bool truncated() const;
  bool guarding() const { return slot_ >= 0; }

 private:
  void release();

  int slot_ = -1;
};

}  // namespace hugepin
