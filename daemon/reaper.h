// The reaper: hugepind's periodic pass over the arenas it manages.
//
//   - a rank whose attached worker is dead is marked dead (mark_rank_dead_if_gone), so the
//     scheduler and the inspector see it, and the next worker takes it over
//   - an arena is owned while any rank has a live attached worker, a live process holds its
//     scheduler role, a process holds a lock on one of its region files (the shim maps its
//     region so), or its creator (other than hugepind itself) still runs; one that has had no
//     owner for `retention` is destroyed (never when retention is 0, the default)
//   - stale files (ipc/stale_files.h) are found, and removed when `remove_stale` is set, once
//     older than `stale_grace` and not in use
//
// How long an arena has been without an owner is counted from when this process first saw it so
// (a restarted daemon starts counting again: it never destroys early). Arenas being created or
// destroyed by a request in flight are left alone.
//
// Thread-safety: one thread at a time (the daemon's loop).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/os.h"
#include "daemon/adopt.h"
#include "hugemem/backing.h"
#include "ipc/stale_files.h"

namespace hugepin::daemon {

struct ReaperOptions {
  ArenaOptions where;
  std::string prefix;
  int64_t retention_ns = 0;   // 0: never destroy
  bool remove_stale = false;
  int64_t stale_grace_ns = 0;
};

// One arena as the reaper last saw it.
struct ArenaState {
  ArenaCheck check;                // health, owner, mode, recorded files and bytes
  uint64_t generation = 0;
  uint32_t ranks = 0;
  uint32_t live_workers = 0;
  uint32_t dead_ranks = 0;         // marked dead, or held by a worker that is gone
  uint32_t locked_regions = 0;     // region files a process holds locked (the shim's mappings)
  bool scheduler_alive = false;
  pid_t scheduler_pid = 0;
  bool creator_alive = false;
  bool owned = false;
  bool inspected = false;          // the segment was read whole (else nobody could be seen owning it)
  int64_t created_realtime_ns = 0; // from the segment: tells a re-created arena of the same name
  int64_t unowned_ns = 0;          // how long it has been without an owner (0 when owned)
};

struct ReapReport {
  std::vector<ArenaState> arenas;        // every arena with a control segment in scope
  std::vector<StaleArena> stale;         // what is stale after this pass
  std::vector<std::string> events;       // what was done, one log line each
  size_t marked_dead = 0;
  size_t expired = 0;                    // destroyed for retention
  size_t stale_removed = 0;
};

class Reaper {
 public:
  // `self`: hugepind's pid (an arena hugepind created is not owned by hugepind's being alive).
  Reaper(Os& os, pid_t self) : os_(&os), self_(self) {}

  void set_options(const ReaperOptions& options) { options_ = options; }
  const ReaperOptions& options() const { return options_; }

  // One pass at CLOCK_MONOTONIC `now_ns`, leaving the arenas named in `busy` alone.
  ReapReport pass(int64_t now_ns, const std::set<std::string>& busy);

  // What the arenas are now, without changing anything (for list and status requests).
  std::vector<ArenaState> observe(int64_t now_ns, const std::set<std::string>& busy);

 private:
  struct Watch {
    int64_t created_realtime_ns = 0;  // tells a new arena of the same name from the old one
    int64_t unowned_since_ns = 0;     // 0: owned when last seen
  };

  ArenaState observe_arena(const std::string& name, int64_t now_ns, bool record);
  void mark_dead_ranks(const std::string& name, ReapReport& report);
  void expire(ArenaState& state, ReapReport& report);
  void reap_stale(const std::set<std::string>& busy, ReapReport& report);
  std::vector<std::string> names_in_scope(const std::set<std::string>& busy);

  Os* os_;
  pid_t self_;
  ReaperOptions options_;
  std::map<std::string, Watch> watches_;
};

}  // namespace hugepin::daemon
