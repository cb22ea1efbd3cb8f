// How arenas are shown: tables for people, JSON for programs (fields documented in docs/commands.md).
#pragma once

#include <string>
#include <vector>

#include "cli/command.h"
#include "hugemem/arena.h"
#include "ipc/arena_control.h"
#include "ipc/stale_files.h"

namespace hugepin::cli {

std::string arena_report_table(const ArenaReport& report);
Json arena_report_json(const ArenaReport& report);

// "control segment /dev/shm/hugepin.kv (1.2 MiB): tp 4 x pp 1, 512 chunks of 1 block, rings of 4096 reports"
std::string arena_control_line(const ArenaCreated& created, const ArenaLayout& layout);
Json arena_control_json(const ArenaCreated& created, const ArenaLayout& layout);

std::string arena_listing_table(const std::vector<ArenaEntry>& listings);
Json arena_listing_json(const std::vector<ArenaEntry>& listings);

// `arena list --stale`: one row per stale arena.
std::string stale_listing_table(const std::vector<StaleArena>& stale);
Json stale_listing_json(const std::vector<StaleArena>& stale);

}  // namespace hugepin::cli
