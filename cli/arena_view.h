// How arenas are shown: tables for people, JSON for programs (fields documented in README).
#pragma once

#include <string>
#include <vector>

#include "cli/command.h"
#include "hugemem/arena.h"

namespace hugepin::cli {

std::string arena_report_table(const ArenaReport& report);
Json arena_report_json(const ArenaReport& report);

std::string arena_listing_table(const std::vector<ArenaListing>& listings);
Json arena_listing_json(const std::vector<ArenaListing>& listings);

}  // namespace hugepin::cli
