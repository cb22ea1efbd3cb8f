#include "daemon/reaper.h"

#include <algorithm>
#include <optional>

#include "base/error.h"
#include "base/file_locks.h"
#include "base/log.h"
#include "ipc/arena_control.h"
#include "ipc/arena_lock.h"
#include "ipc/control_segment.h"
#include "ipc/inspect.h"

namespace hugepin::daemon {
namespace {

bool in_scope(const std::string& name, const std::string& prefix) { return name.compare(0, prefix.size(), prefix) == 0; }

// A rank whose worker died holding it (marked dead or not yet).
bool rank_dead(const RankStatus& status) {
  if (status.state == static_cast<uint8_t>(RankState::kDead)) return true;
  const bool held = status.state == static_cast<uint8_t>(RankState::kAttached) ||
                    status.state == static_cast<uint8_t>(RankState::kPinning) ||
                    status.state == static_cast<uint8_t>(RankState::kReady);
  return held && status.owner != 0 && !status.alive;
}

}  // namespace

std::vector<std::string> Reaper::names_in_scope(const std::set<std::string>& busy) {
  std::vector<std::string> names;
  std::vector<std::string> files;
  if (os_->list_data_dir(std::string(kControlSegmentDir), &files) < 0) return names;
  for (const std::string& file : files) {
    std::string name = arena_of_segment_file(file);
    if (!name.empty() && in_scope(name, options_.prefix) && busy.count(name) == 0) names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

ArenaState Reaper::observe_arena(const std::string& name, int64_t now_ns, bool record) {
  ArenaState state;
  state.check = check_arena(*os_, name, /*need_write=*/true);
  int64_t created_realtime_ns = 0;
  try {
    ArenaSnapshot snapshot = inspect_arena(*os_, name);
    state.generation = snapshot.generation;
    state.ranks = snapshot.header.rank_count;
    state.scheduler_alive = snapshot.scheduler_alive;
    state.scheduler_pid = snapshot.scheduler_pid;
    state.creator_alive = snapshot.creator_alive && snapshot.header.creator_pid != self_;
    created_realtime_ns = snapshot.header.created_realtime_ns;
    state.created_realtime_ns = created_realtime_ns;
    for (const RankSnapshot& rank : snapshot.ranks) {
      if (rank.status.alive) ++state.live_workers;
      if (rank_dead(rank.status)) ++state.dead_ranks;
      if (file_is_locked(*os_, rank.backing_path)) ++state.locked_regions;
    }
    state.inspected = true;
  } catch (const Error&) {
    // Unreadable or corrupt: the check says why; nobody can be seen owning it.
  }
  state.owned = state.live_workers > 0 || state.scheduler_alive || state.creator_alive || state.locked_regions > 0;
  auto it = watches_.find(name);
  if (record) {
    if (it == watches_.end() || it->second.created_realtime_ns != created_realtime_ns) {
      it = watches_.insert_or_assign(name, Watch{created_realtime_ns, 0}).first;
    }
    if (state.owned) {
      it->second.unowned_since_ns = 0;
    } else if (it->second.unowned_since_ns == 0) {
      it->second.unowned_since_ns = now_ns;
    }
  }
  if (!state.owned && it != watches_.end() && it->second.unowned_since_ns != 0) {
    state.unowned_ns = now_ns - it->second.unowned_since_ns;
  }
  return state;
}

void Reaper::mark_dead_ranks(const std::string& name, ReapReport& report) {
  try {
    ControlSegment segment = ControlSegment::open(*os_, name, SegmentAccess::kReadWrite);
    for (uint32_t rank = 0; rank < segment.header().rank_count; ++rank) {
      const pid_t pid = read_rank_status(*os_, segment.region(rank)).pid;
      if (mark_rank_dead_if_gone(*os_, segment, rank)) {
        ++report.marked_dead;
        report.events.push_back(cat("arena '", name, "' rank ", rank, ": worker pid ", pid, " is gone: marked dead"));
      }
    }
  } catch (const Error&) {
    // Inaccessible or inconsistent: reported by the check, nothing to mark.
  }
}

void Reaper::expire(ArenaState& state, ReapReport& report) {
  const std::string& name = state.check.name;
  if (options_.retention_ns <= 0 || state.owned || !state.inspected || state.check.health != ArenaHealth::kConsistent ||
      state.unowned_ns < options_.retention_ns) {
    return;
  }
  // Under the arena's lock, exclusive of claims (ipc/arena_lock.h), looked at once more: a
  // worker or scheduler may have attached since this pass observed the arena, and none can
  // between this look and the destroy. A claim in progress leaves the arena to the next pass.
  std::optional<ArenaDestroyLock> lock;
  try {
    lock = ArenaDestroyLock::try_take(*os_, name);
  } catch (const Error& error) {
    report.events.push_back(cat("arena '", name, "' is past its retention but cannot be locked: ", error.what()));
    return;
  }
  if (!lock) {
    report.events.push_back(cat("arena '", name, "' is past its retention but a claim holds its lock (or its segment just went): left for the next pass"));
    return;
  }
  // Fails closed: an arena that could not be read whole this time, or one re-created under the
  // same name since the pass's first look, is not destroyed.
  const ArenaState again = observe_arena(name, 0, /*record=*/false);
  if (again.owned || !again.inspected || again.check.health != ArenaHealth::kConsistent ||
      again.created_realtime_ns != state.created_realtime_ns) {
    report.events.push_back(cat("arena '", name, "' is past its retention but changed or could not be read again under ",
                                "its lock: left for the next pass"));
    return;
  }
  try {
    ArenaDestroyed destroyed = destroy_arena_with_control(*os_, name, options_.where);
    ++report.expired;
    watches_.erase(name);
    report.events.push_back(cat("arena '", name, "' had no live worker, scheduler, creator or locked region for ",
                                state.unowned_ns / 1'000'000'000, " s (retention ", options_.retention_ns / 1'000'000'000,
                                " s): destroyed (", destroyed.region_files, " region files)"));
    state.check.health = ArenaHealth::kNoSegment;
  } catch (const Error& error) {
    report.events.push_back(cat("arena '", name, "' is past its retention but cannot be destroyed: ", error.what()));
  }
}

void Reaper::reap_stale(const std::set<std::string>& busy, ReapReport& report) {
  std::vector<StaleArena> stale = find_stale_arenas(*os_, options_.where, options_.prefix);
  std::erase_if(stale, [&](const StaleArena& s) { return busy.count(s.arena) != 0; });
  if (options_.remove_stale) {
    std::erase_if(stale, [&](const StaleArena& s) {
      if (s.in_use || s.age_ns < options_.stale_grace_ns) return false;
      try {
        if (!remove_stale_arena(*os_, s.arena, options_.stale_grace_ns, options_.where)) return false;
      } catch (const Error& error) {
        report.events.push_back(cat("stale arena '", s.arena, "' cannot be removed: ", error.what()));
        return false;
      }
      ++report.stale_removed;
      report.events.push_back(cat("removed stale arena '", s.arena, "' (", stale_kind_name(s.kind), ", ",
                                  s.region_files, " region files, ", s.bytes, " bytes)"));
      return true;
    });
  }
  report.stale = std::move(stale);
}

ReapReport Reaper::pass(int64_t now_ns, const std::set<std::string>& busy) {
  ReapReport report;
  const std::vector<std::string> names = names_in_scope(busy);
  for (const std::string& name : names) {
    mark_dead_ranks(name, report);
    ArenaState state = observe_arena(name, now_ns, /*record=*/true);
    expire(state, report);
    if (state.check.health != ArenaHealth::kNoSegment) report.arenas.push_back(std::move(state));
  }
  // Forget arenas that are gone, so that a new one of the same name starts afresh.
  std::erase_if(watches_, [&](const auto& watch) {
    return std::find(names.begin(), names.end(), watch.first) == names.end() && busy.count(watch.first) == 0;
  });
  reap_stale(busy, report);
  return report;
}

std::vector<ArenaState> Reaper::observe(int64_t now_ns, const std::set<std::string>& busy) {
  std::vector<ArenaState> arenas;
  for (const std::string& name : names_in_scope(busy)) {
    ArenaState state = observe_arena(name, now_ns, /*record=*/false);
    if (state.check.health != ArenaHealth::kNoSegment) arenas.push_back(std::move(state));
  }
  return arenas;
}

}  // namespace hugepin::daemon
