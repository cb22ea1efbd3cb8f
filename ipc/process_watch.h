// Says when the process behind a rank is gone: what OffloadScheduler::rank_exited() needs before
// it may release the chunks that process could still copy into.
//
// Watches by pidfd (pidfd_open, Linux 5.3): the descriptor names exactly the process it was
// opened for, so a reused pid cannot fool it, and it turns readable once the process has exited,
// that is after the kernel tore down its memory and closed its files (its GPU context with
// them), before its parent reaps it. Where pidfd_open is missing (ENOSYS: an old kernel, a
// seccomp filter) it falls back to kill(pid, 0), where only ESRCH counts as gone: a zombie stays
// alive until reaped, and a reused pid stays alive for good. The fallback can be late, never
// early.
//
// Every call goes through the Os seam (base/os.h): a test plays a kernel without pidfds.
//
// Thread-safety: none; the scheduler's thread owns it. Owns its pidfds: move-only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <vector>

#include "base/os.h"

namespace hugepin {

class ProcessWatch {
 public:
  enum class Method : uint8_t {
    kAuto = 0,        // pidfd where the kernel has it, else kill(pid, 0)
    kKillSignal = 1,  // kill(pid, 0) only
  };

  // `os` outlives the watch.
  explicit ProcessWatch(Os& os, Method method = Method::kAuto);
  ~ProcessWatch();
  ProcessWatch(ProcessWatch&& other) noexcept;
  ProcessWatch& operator=(ProcessWatch&& other) noexcept;
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;

  // Watches `pid` as the process of `rank`, replacing what that rank had. A pid that no longer
  // exists is reported gone by the next poll(). Throws Error naming the pid when it is not
  // positive or pidfd_open fails for another reason (EMFILE, ...), changing nothing.
  void watch(uint32_t rank, pid_t pid);
  // Stops watching `rank`; no-op when it is not watched.
  void forget(uint32_t rank);
  // Appends, in rank order, every watched rank whose process is gone, and stops watching them.
  // Non-blocking.
  void poll(std::vector<uint32_t>* gone);

  bool watching(uint32_t rank) const { return watched_.count(rank) != 0; }
  // True when every watch so far got a pidfd; false once the fallback was used.
  bool uses_pidfd() const { return uses_pidfd_; }

 private:
  struct Watched {
    pid_t pid = 0;
    int pidfd = -1;     // -1: probe with kill(pid, 0)
    bool gone = false;  // the process was gone when watched
  };

  bool is_gone(const Watched& watched) const;
  void close_pidfd(const Watched& watched);
  void close_all();

  Os* os_;
  Method method_;
  bool uses_pidfd_ = true;
  std::map<uint32_t, Watched> watched_;
};

}  // namespace hugepin
