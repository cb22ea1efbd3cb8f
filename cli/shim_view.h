// How the shim's allocation tables are shown, by `hugepin shim list` and `hugepin inspect`.
#pragma once

#include <string>
#include <vector>

#include "cli/command.h"
#include "shim/shim_registry.h"

namespace hugepin::cli {

// {"processes": [ {path, pid, program, uid, alive, created_ns, problem, bytes_asked, bytes_given,
// allocations: [ {address, bytes_asked, bytes_given, page_size, node, backing, arena, rank, api,
// flags, time_ns} ]} ]}
Json shim_tables_json(const std::vector<ShimTable>& tables);
// One row per allocation (a process without any gets one row of dashes), then each unreadable
// table's problem on its own line.
std::string shim_tables_table(const std::vector<ShimTable>& tables);

}  // namespace hugepin::cli
