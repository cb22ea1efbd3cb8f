#include "cli/arena_view.h"

#include "base/size.h"
#include "base/table.h"

namespace hugepin::cli {
namespace {

std::string node_text(int node) { return node < 0 ? "any" : std::to_string(node); }

Json placement_json(const Placement& placement) {
  Json nodes = Json::object();
  for (auto [node, pages] : placement.pages_per_node) nodes[node < 0 ? "absent" : std::to_string(node)] = pages;
  return {{"page_size", placement.page_size},
          {"pages_total", placement.pages_total},
          {"pages_checked", placement.pages_checked},
          {"pages_per_node", nodes}};
}

}  // namespace

std::string arena_report_table(const ArenaReport& report) {
  Table table({"RANK", "BYTES", "PAGE", "NODE ASKED", "PAGES ON", "THREADS", "RESERVE s", "FAULT s", "VERIFY s", "FILE"},
              {Table::Align::kRight, Table::Align::kRight, Table::Align::kRight, Table::Align::kRight,
               Table::Align::kLeft, Table::Align::kRight, Table::Align::kRight, Table::Align::kRight,
               Table::Align::kRight, Table::Align::kLeft});
  for (const RegionReport& region : report.regions) {
    table.add_row({std::to_string(region.rank), format_bytes(region.bytes), page_size_name(region.placement.page_size),
                   node_text(region.node_requested), region.placement.describe(),
                   std::to_string(region.prefault_threads), fixed(region.reserve_seconds, 3),
                   fixed(region.fault_seconds, 3), fixed(region.verify_seconds, 3), region.path});
  }
  return table.render();
}

Json arena_report_json(const ArenaReport& report) {
  Json regions = Json::array();
  for (const RegionReport& region : report.regions) {
    regions.push_back({{"rank", region.rank},
                       {"path", region.path},
                       {"bytes_requested", region.bytes_requested},
                       {"bytes", region.bytes},
                       {"node_requested", region.node_requested},
                       {"placement", placement_json(region.placement)},
                       {"fallback", region.fallback},
                       {"prefault_threads", region.prefault_threads},
                       {"reserve_seconds", region.reserve_seconds},
                       {"fault_seconds", region.fault_seconds},
                       {"verify_seconds", region.verify_seconds}});
  }
  return {{"name", report.name}, {"regions", regions}};
}

std::string arena_control_line(const ArenaCreated& created, const ArenaLayout& layout) {
  return cat("control segment ", created.segment_path, " (", format_bytes(created.segment_bytes), "): tp ", layout.tp,
             " x pp ", layout.pp, ", ", layout.chunk_count, " chunks of ", layout.blocks_per_chunk,
             layout.blocks_per_chunk == 1 ? " block" : " blocks", ", rings of ", created.ring_capacity, " reports\n");
}

Json arena_control_json(const ArenaCreated& created, const ArenaLayout& layout) {
  return {{"path", created.segment_path},       {"bytes", created.segment_bytes},
          {"tp", layout.tp},                    {"pp", layout.pp},
          {"chunk_count", layout.chunk_count},  {"blocks_per_chunk", layout.blocks_per_chunk},
          {"ring_capacity", created.ring_capacity}};
}

namespace {

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode));
  return text;
}

}  // namespace

std::string arena_listing_table(const std::vector<ArenaEntry>& listings) {
  Table table({"ARENA", "RANK", "BYTES", "PAGE", "OWNER", "MODE", "FILE"},
              {Table::Align::kLeft, Table::Align::kRight, Table::Align::kRight, Table::Align::kRight,
               Table::Align::kRight, Table::Align::kRight, Table::Align::kLeft});
  for (const ArenaEntry& listing : listings) {
    if (listing.control) {
      const SegmentFile& control = *listing.control;
      table.add_row({listing.name, "control", format_bytes(control.bytes), "4K", std::to_string(control.owner),
                     mode_text(control.mode), control.path});
    } else {
      table.add_row({listing.name, "-", "-", "-", "-", "-", "(no control segment)"});
    }
    if (listing.regions.empty()) table.add_row({listing.name, "-", "-", "-", "-", "-", "(no region files)"});
    for (const RegionFile& region : listing.regions) {
      table.add_row({listing.name, std::to_string(region.rank), format_bytes(region.bytes),
                     page_size_name(region.page_size), std::to_string(region.owner), mode_text(region.mode), region.path});
    }
  }
  return table.render();
}

Json arena_listing_json(const std::vector<ArenaEntry>& listings) {
  Json arenas = Json::array();
  for (const ArenaEntry& listing : listings) {
    Json regions = Json::array();
    for (const RegionFile& region : listing.regions) {
      regions.push_back({{"rank", region.rank}, {"path", region.path}, {"bytes", region.bytes},
                         {"page_size", region.page_size}, {"owner_uid", region.owner}, {"mode", region.mode}});
    }
    Json control = nullptr;
    if (listing.control) {
      control = {{"path", listing.control->path}, {"bytes", listing.control->bytes},
                 {"owner_uid", listing.control->owner}, {"group_gid", listing.control->group},
                 {"mode", listing.control->mode}};
    }
    arenas.push_back({{"name", listing.name}, {"control", control}, {"regions", regions}});
  }
  return {{"arenas", arenas}};
}

std::string stale_listing_table(const std::vector<StaleArena>& stale) {
  Table table({"ARENA", "KIND", "FILES", "BYTES", "OWNER", "AGE", "IN USE", "PATH"},
              {Table::Align::kLeft, Table::Align::kLeft, Table::Align::kRight, Table::Align::kRight,
               Table::Align::kRight, Table::Align::kRight, Table::Align::kLeft, Table::Align::kLeft});
  for (const StaleArena& arena : stale) {
    std::string paths;
    for (const std::string& path : arena.paths) paths += (paths.empty() ? "" : " ") + path;
    table.add_row({arena.arena, std::string(stale_kind_name(arena.kind)), std::to_string(arena.region_files),
                   format_bytes(arena.bytes), std::to_string(arena.owner), cat(arena.age_ns / 1'000'000'000, "s"),
                   arena.in_use ? "yes" : "no", paths});
  }
  return table.render();
}

Json stale_listing_json(const std::vector<StaleArena>& stale) {
  Json rows = Json::array();
  for (const StaleArena& arena : stale) {
    rows.push_back({{"arena", arena.arena},
                    {"kind", stale_kind_name(arena.kind)},
                    {"paths", arena.paths},
                    {"region_files", arena.region_files},
                    {"bytes", arena.bytes},
                    {"owner_uid", arena.owner},
                    {"age_seconds", static_cast<double>(arena.age_ns) / 1e9},
                    {"in_use", arena.in_use}});
  }
  return {{"stale", rows}};
}

}  // namespace hugepin::cli
