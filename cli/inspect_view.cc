#include "cli/inspect_view.h"

#include <ctime>
#include <iterator>

#include "base/file_locks.h"
#include "base/size.h"
#include "base/table.h"
#include "hugemem/arena.h"
#include "ipc/scheduler_counters.h"

namespace hugepin::cli {
namespace {

std::string node_text(int node) { return node < 0 ? "any" : std::to_string(node); }

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode));
  return text;
}

std::string local_time(int64_t realtime_ns) {
  time_t seconds = static_cast<time_t>(realtime_ns / 1'000'000'000);
  tm parts{};
  localtime_r(&seconds, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &parts);
  return text;
}

std::string age_text(int64_t then_ns, int64_t now_ns) {
  if (then_ns <= 0 || now_ns < then_ns) return "-";
  return fixed(static_cast<double>(now_ns - then_ns) / 1e9, 1) + " s";
}

std::string alive_text(pid_t pid, bool alive) { return pid == 0 ? "-" : alive ? "yes" : "DEAD"; }

const std::vector<double>* rates_of(const RatesByArena& rates, const std::string& name) {
  auto it = rates.find(name);
  return it == rates.end() || it->second.empty() ? nullptr : &it->second;
}

std::string arena_heading(const ArenaSnapshot& s) {
  const SegmentHeader& h = s.header;
  return cat("arena ", s.name, ": tp ", h.tp, " x pp ", h.pp, ", ", h.chunk_count, " chunks of ", h.blocks_per_chunk,
             h.blocks_per_chunk == 1 ? " block" : " blocks", ", generation ", s.generation, "\n",
             "  created ", local_time(h.created_realtime_ns), " by pid ", h.creator_pid, " (uid ", h.creator_uid, ", ",
             s.creator_alive ? "alive" : "gone", "); segment ", s.path, " (", format_bytes(h.segment_bytes), ", mode ",
             mode_text(s.mode), ", owner uid ", s.owner_uid, ")\n",
             "  scheduler: ", s.scheduler_pid == 0 ? std::string("none") : cat("pid ", s.scheduler_pid, s.scheduler_alive ? " (alive)" : " (DEAD)"));
}

std::string scheduler_line(const ArenaSnapshot& s) {
  std::string line = "  ";
  for (size_t i = 0; i < std::size(kPublishedFigures); ++i) {
    line += cat(i == 0 ? "" : ", ", kPublishedFigures[i].label, " ", s.scheduler.figures.*kPublishedFields[i]);
  }
  return line + (s.scheduler.consistent ? "" : " (read mid-write)");
}

const ShimHolder* holder_of(const ShimHoldersByArena& holders, const std::string& arena, uint32_t rank) {
  auto by_arena = holders.find(arena);
  if (by_arena == holders.end()) return nullptr;
  auto it = by_arena->second.find(rank);
  return it == by_arena->second.end() ? nullptr : &it->second;
}

// A rank a process holds through the shim shows that process, where no live worker holds it.
std::string ranks_table(const ArenaSnapshot& s, const std::vector<double>* rates, const ShimHoldersByArena& holders,
                        int64_t now_ns) {
  Table table({"RANK", "TP", "PP", "NODE ASKED", "NODE", "PAGE", "BYTES", "PINNED", "PID", "ALIVE", "STATE",
               "HEARTBEAT", "TAKEOVERS", "RING", "POSTED", "REPORTS/s"},
              std::vector<Table::Align>(16, Table::Align::kRight));
  std::string notes;
  for (size_t i = 0; i < s.ranks.size(); ++i) {
    const RankSnapshot& r = s.ranks[i];
    const ShimHolder* shim = r.status.alive ? nullptr : holder_of(holders, s.name, r.rank);
    table.add_row({std::to_string(r.rank), std::to_string(r.tp_rank), std::to_string(r.pp_rank),
                   node_text(r.node_requested), r.node_obtained < 0 ? "?" : std::to_string(r.node_obtained),
                   page_size_name(r.page_size), format_bytes(r.bytes),
                   format_bytes(shim != nullptr ? shim->pinned_bytes : r.status.pinned_bytes),
                   shim != nullptr ? std::to_string(shim->pid) : r.status.pid == 0 ? "-" : std::to_string(r.status.pid),
                   shim != nullptr ? "yes" : alive_text(r.status.pid, r.status.alive),
                   shim != nullptr ? "shim" : std::string(rank_state_name(r.status.state)),
                   age_text(r.status.heartbeat_ns, now_ns), std::to_string(r.status.takeovers),
                   cat(r.ring_depth, "/", r.ring_capacity), std::to_string(r.reports_posted),
                   rates != nullptr ? fixed((*rates)[i], 0) : "-"});
    if (shim != nullptr) {
      notes += cat("  rank ", r.rank, " is held through the LD_PRELOAD shim by pid ", shim->pid, " (", shim->program,
                   ", uid ", shim->uid, "): ", shim->allocations, shim->allocations == 1 ? " allocation, " : " allocations, ",
                   format_bytes(shim->bytes_given), " given, ", format_bytes(shim->pinned_bytes), " pinned\n");
    }
  }
  return table.render() + notes;
}

Json shim_json(const ShimHolder* shim) {
  if (shim == nullptr) return nullptr;
  return {{"pid", shim->pid},
          {"program", shim->program},
          {"uid", shim->uid},
          {"allocations", shim->allocations},
          {"bytes_given", shim->bytes_given},
          {"pinned_bytes", shim->pinned_bytes}};
}

Json rank_json(const RankSnapshot& r, const std::vector<double>* rates, size_t index, const ShimHolder* shim,
               int64_t now_ns) {
  Json heartbeat_age = nullptr;
  if (r.status.heartbeat_ns > 0 && now_ns >= r.status.heartbeat_ns) {
    heartbeat_age = static_cast<double>(now_ns - r.status.heartbeat_ns) / 1e9;
  }
  Json rate = rates != nullptr ? Json((*rates)[index]) : Json(nullptr);
  return {{"rank", r.rank},
          {"tp_rank", r.tp_rank},
          {"pp_rank", r.pp_rank},
          {"node_requested", r.node_requested},
          {"node_obtained", r.node_obtained},
          {"page_size", r.page_size},
          {"bytes", r.bytes},
          {"payload_bytes_per_block", r.payload_bytes_per_block},
          {"chunk_count", r.chunk_count},
          {"backing_path", r.backing_path},
          {"pid", r.status.pid},
          {"alive", r.status.alive},
          {"state", rank_state_name(r.status.state)},
          {"attach_generation", r.status.attach_generation},
          {"takeovers", r.status.takeovers},
          {"heartbeat_age_seconds", heartbeat_age},
          {"pinned_bytes", r.status.pinned_bytes},
          {"shim", shim_json(shim)},
          {"ring",
           {{"capacity", r.ring_capacity},
            {"depth", r.ring_depth},
            {"posted", r.reports_posted},
            {"consumed", r.reports_consumed},
            {"reports_per_second", rate}}}};
}

Json scheduler_json(const ArenaSnapshot& s) {
  Json scheduler = {{"pid", s.scheduler_pid}, {"alive", s.scheduler_alive}, {"consistent", s.scheduler.consistent}};
  for (size_t i = 0; i < std::size(kPublishedFigures); ++i) {
    scheduler[std::string(kPublishedFigures[i].name)] = s.scheduler.figures.*kPublishedFields[i];
  }
  return scheduler;
}

Json arena_json(const ArenaSnapshot& s, const std::vector<double>* rates, const ShimHoldersByArena& holders,
                int64_t now_ns) {
  const SegmentHeader& h = s.header;
  Json ranks = Json::array();
  for (size_t i = 0; i < s.ranks.size(); ++i) {
    ranks.push_back(rank_json(s.ranks[i], rates, i, holder_of(holders, s.name, s.ranks[i].rank), now_ns));
  }
  return {{"name", s.name},
          {"error", nullptr},
          {"segment", {{"path", s.path}, {"bytes", h.segment_bytes}, {"owner_uid", s.owner_uid},
                       {"owner_gid", s.owner_gid}, {"mode", s.mode}}},
          {"layout_version", h.layout_version},
          {"generation", s.generation},
          {"created_unix_ns", h.created_realtime_ns},
          {"creator", {{"pid", h.creator_pid}, {"uid", h.creator_uid}, {"alive", s.creator_alive}}},
          {"tp", h.tp},
          {"pp", h.pp},
          {"rank_count", h.rank_count},
          {"blocks_per_chunk", h.blocks_per_chunk},
          {"chunk_count", h.chunk_count},
          {"ring_capacity", h.ring_capacity},
          {"plan_bytes", s.plan_bytes},
          {"scheduler", scheduler_json(s)},
          {"ranks", ranks}};
}

}  // namespace

ShimHoldersByArena shim_holders(Os& os, const std::vector<InspectEntry>& entries, const std::vector<ShimTable>& tables,
                                const ArenaOptions& where) {
  ShimHoldersByArena holders;
  for (const InspectEntry& entry : entries) {
    if (!entry.snapshot) continue;
    for (const RankSnapshot& rank : entry.snapshot->ranks) {
      std::optional<ShimHolder> holder = find_shim_holder(tables, entry.name, rank.rank);
      if (!holder) continue;
      std::optional<RegionFile> region = find_region(os, entry.name, rank.rank, where);
      if (region && file_is_locked(os, region->path)) holders[entry.name][rank.rank] = *holder;
    }
  }
  return holders;
}

std::string inspect_text(const std::vector<InspectEntry>& entries, const RatesByArena& rates,
                         const ShimHoldersByArena& holders, int64_t now_ns) {
  if (entries.empty()) return "no arenas\n";
  std::string text;
  for (const InspectEntry& entry : entries) {
    if (!text.empty()) text += "\n";
    if (!entry.snapshot) {
      text += cat("arena ", entry.name, ": ", entry.error, "\n");
      continue;
    }
    text += arena_heading(*entry.snapshot) + "\n" + scheduler_line(*entry.snapshot) + "\n";
    text += ranks_table(*entry.snapshot, rates_of(rates, entry.name), holders, now_ns);
  }
  return text;
}

Json inspect_json(const std::vector<InspectEntry>& entries, const RatesByArena& rates, const ShimHoldersByArena& holders,
                  int64_t now_ns) {
  Json arenas = Json::array();
  for (const InspectEntry& entry : entries) {
    if (entry.snapshot) {
      arenas.push_back(arena_json(*entry.snapshot, rates_of(rates, entry.name), holders, now_ns));
    } else {
      arenas.push_back({{"name", entry.name}, {"error", entry.error}});
    }
  }
  return {{"arenas", arenas}};
}

}  // namespace hugepin::cli
