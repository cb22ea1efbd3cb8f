#include "daemon/reply_json.h"

#include <cstdio>

namespace hugepin::daemon {

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode));
  return text;
}

double seconds(int64_t nanos) { return static_cast<double>(nanos) / 1e9; }

Json created_json(const ArenaCreated& created, const ArenaOptions& options) {
  Json regions = Json::array();
  for (const RegionReport& region : created.data.regions) {
    regions.push_back({{"rank", region.rank},
                       {"path", region.path},
                       {"bytes", region.bytes},
                       {"page_size", region.placement.page_size},
                       {"node_requested", region.node_requested},
                       {"node", region.placement.majority_node()},
                       {"fallback", region.fallback}});
  }
  return {{"name", created.data.name},
          {"segment", created.segment_path},
          {"segment_bytes", created.segment_bytes},
          {"ring_capacity", created.ring_capacity},
          {"group_gid", options.group ? Json(*options.group) : Json(nullptr)},
          {"mode", mode_text(options.group ? 0660 : options.mode)},
          {"regions", regions}};
}

Json destroyed_json(const std::string& name, const ArenaDestroyed& destroyed) {
  return {{"name", name}, {"control_removed", destroyed.control_removed}, {"region_files", destroyed.region_files}};
}

Json arena_state_json(const ArenaState& state) {
  const ArenaCheck& check = state.check;
  Json json{{"name", check.name},
            {"health", health_name(check.health)},
            {"owner_uid", check.owner_uid},
            {"group_gid", check.group_gid},
            {"mode", mode_text(check.mode)},
            {"generation", state.generation},
            {"ranks", state.ranks},
            {"bytes", check.bytes},
            {"live_workers", state.live_workers},
            {"dead_ranks", state.dead_ranks},
            {"locked_regions", state.locked_regions},
            {"scheduler_alive", state.scheduler_alive},
            {"creator_alive", state.creator_alive},
            {"owned", state.owned},
            {"unowned_seconds", seconds(state.unowned_ns)}};
  if (!check.reason.empty()) json["reason"] = check.reason;
  return json;
}

Json stale_json(const StaleArena& stale) {
  return {{"arena", stale.arena},         {"kind", stale_kind_name(stale.kind)}, {"paths", stale.paths},
          {"region_files", stale.region_files}, {"bytes", stale.bytes},     {"owner_uid", stale.owner},
          {"age_seconds", seconds(stale.age_ns)}, {"in_use", stale.in_use}};
}

Json quarantine_json(const QuarantineEntry& entry) {
  return {{"arena", entry.arena}, {"entry", entry.name}, {"path", entry.path}, {"reason", entry.reason},
          {"moved", entry.moved}};
}

}  // namespace hugepin::daemon
