// hugepin plan --input FILE [--json]
#include <algorithm>
#include <iostream>

#include "base/size.h"
#include "base/table.h"
#include "cli/command.h"
#include "cli/plan_file.h"
#include "planner/plan_json.h"

namespace hugepin::cli {
namespace {

using planner::CapacityPlan;

std::string node_text(int node) { return node < 0 ? "-" : std::to_string(node); }

std::string ranks_table(const CapacityPlan& plan) {
  Table table({"RANK", "TP", "PP", "GPU", "NODE", "PAYLOAD/BLOCK", "PAYLOAD", "REGION BYTES", "ROUNDING", "PAGES"},
              {Table::Align::kRight, Table::Align::kRight, Table::Align::kRight, Table::Align::kLeft,
               Table::Align::kRight, Table::Align::kRight, Table::Align::kRight, Table::Align::kRight,
               Table::Align::kRight, Table::Align::kRight});
  for (const planner::RankPlan& rank : plan.ranks) {
    table.add_row({std::to_string(rank.rank), std::to_string(rank.tp_rank), std::to_string(rank.pp_rank),
                   rank.gpu_pci.empty() ? "-" : rank.gpu_pci, node_text(rank.numa_node),
                   std::to_string(rank.payload_bytes_per_block), format_bytes(rank.payload_bytes),
                   std::to_string(rank.region_bytes), format_bytes(rank.rounding_bytes), std::to_string(rank.pages)});
  }
  return table.render();
}

std::string pool_table(const CapacityPlan& plan) {
  bool any_fix = std::any_of(plan.pool.begin(), plan.pool.end(), [](const planner::PoolNeed& need) { return !need.fix.empty(); });
  std::vector<std::string> headers{"NODE", "PAGE", "NEEDED", "AVAILABLE", "SERVES"};
  std::vector<Table::Align> aligns{Table::Align::kRight, Table::Align::kRight, Table::Align::kRight,
                                   Table::Align::kRight, Table::Align::kLeft};
  if (any_fix) {
    headers.push_back("FIX");
    aligns.push_back(Table::Align::kLeft);
  }
  Table table(headers, aligns);
  for (const planner::PoolNeed& need : plan.pool) {
    std::vector<std::string> row{need.node < 0 ? "any" : std::to_string(need.node), page_size_name(need.page_size),
                                 std::to_string(need.pages_needed),
                                 need.pages_available ? std::to_string(*need.pages_available) : "shm",
                                 need.can_serve ? "yes" : "no"};
    if (any_fix) row.push_back(need.fix.empty() ? "-" : need.fix);
    table.add_row(row);
  }
  return table.render();
}

std::string groups_text(const CapacityPlan& plan) {
  if (plan.groups.empty()) return "none (payloads given as bytes_per_block)";
  std::string text;
  for (uint32_t group : plan.groups) text += cat(text.empty() ? "" : ", ", group);
  return text;
}

void print_plan(const CapacityPlan& plan) {
  std::cout << ranks_table(plan) << "\n";
  std::cout << "chunks:   " << plan.chunk_count << " x " << plan.blocks_per_chunk << " blocks, shared by all "
            << plan.ranks.size() << " ranks (tp " << plan.tp << " x pp " << plan.pp << "); one chunk "
            << plan.chunk_bytes << " bytes (" << plan.payload_bytes_per_block << " bytes per block over all ranks)\n";
  std::cout << "payload:  " << plan.payload_bytes << " bytes (" << format_bytes(plan.payload_bytes)
            << ") of cpu_bytes " << plan.cpu_bytes << ", " << plan.cpu_bytes - plan.payload_bytes << " unused\n";
  std::cout << "regions:  " << plan.region_bytes << " bytes (" << format_bytes(plan.region_bytes) << ") on "
            << page_size_name(plan.page_size) << " pages ("
            << planner::page_size_choice_name(plan.page_size_choice) << "), " << plan.rounding_bytes
            << " bytes of rounding\n";
  std::cout << "groups:   " << groups_text(plan) << "\n\n";
  std::cout << pool_table(plan);
  std::cout << "pool:     " << (plan.pool_can_serve ? "can serve this plan now" : "cannot serve this plan now")
            << "\n";
  for (const std::string& note : plan.notes) std::cout << "note: " << note << "\n";
}

}  // namespace

void add_plan_command(CLI::App& app, Context& context) {
  struct PlanArgs {
    std::string input;
    bool json = false;
  };
  auto args = std::make_shared<PlanArgs>();
  CLI::App* plan = app.add_subcommand("plan", "Capacity plan from per-rank KV layouts (docs/planner.md)");
  plan->add_option("--input", args->input, "Plan input JSON: parallel layout, cpu_bytes, per-rank KV tensors")
      ->required()
      ->check(CLI::ExistingFile);
  plan->add_flag("--json", args->json, "Print JSON (documented in docs/commands.md)");
  plan->callback([&context, args] {
    context.action = [&context, args] {
      CapacityPlan planned = plan_from_file(context.os(), args->input);
      if (args->json) {
        print_json(planner::plan_json(planned));
      } else {
        print_plan(planned);
      }
      return 0;
    };
  });
}

}  // namespace hugepin::cli
