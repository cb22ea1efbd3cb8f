#include "cli/shim_view.h"

#include <cstdio>

#include "base/size.h"
#include "base/table.h"

namespace hugepin::cli {
namespace {

std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

std::string state_of(const ShimTable& table) {
  if (!table.problem.empty()) return "unreadable";
  return table.alive ? "live" : "gone";
}

std::string backing_of(const ShimAllocation& allocation) {
  return allocation.backing == "arena" ? cat("arena ", allocation.arena, " rank ", allocation.rank) : "private";
}

}  // namespace

Json shim_tables_json(const std::vector<ShimTable>& tables) {
  Json processes = Json::array();
  for (const ShimTable& table : tables) {
    Json allocations = Json::array();
    for (const ShimAllocation& a : table.allocations) {
      allocations.push_back({{"address", a.address},     {"bytes_asked", a.bytes_asked}, {"bytes_given", a.bytes_given},
                             {"page_size", a.page_size}, {"node", a.node},               {"backing", a.backing},
                             {"arena", a.arena},         {"rank", a.rank},               {"api", a.api},
                             {"flags", a.flags},         {"time_ns", a.time_ns}});
    }
    processes.push_back({{"path", table.path},
                         {"pid", table.pid},
                         {"program", table.program},
                         {"uid", table.uid},
                         {"alive", table.alive},
                         {"created_ns", table.created_ns},
                         {"problem", table.problem},
                         {"bytes_asked", table.bytes_asked()},
                         {"bytes_given", table.bytes_given()},
                         {"allocations", allocations}});
  }
  return Json{{"processes", processes}};
}

std::string shim_tables_table(const std::vector<ShimTable>& tables) {
  using A = Table::Align;
  Table table({"PID", "PROGRAM", "STATE", "ADDRESS", "ASKED", "GIVEN", "PAGE", "NODE", "BACKING", "API"},
              {A::kRight, A::kLeft, A::kLeft, A::kLeft, A::kRight, A::kRight, A::kRight, A::kRight, A::kLeft, A::kLeft});
  std::string problems;
  for (const ShimTable& t : tables) {
    if (!t.problem.empty()) problems += cat(t.problem, "\n");
    if (t.allocations.empty()) {
      table.add_row({std::to_string(t.pid), t.program, state_of(t), "-", "-", "-", "-", "-", "-", "-"});
    }
    for (const ShimAllocation& a : t.allocations) {
      table.add_row({std::to_string(t.pid), t.program, state_of(t), hex(a.address), format_bytes(a.bytes_asked),
                     format_bytes(a.bytes_given), page_size_name(a.page_size), a.node < 0 ? "-" : std::to_string(a.node),
                     backing_of(a), a.api});
    }
  }
  return table.render() + problems;
}

}  // namespace hugepin::cli
