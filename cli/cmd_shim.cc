// hugepin shim env|list: the LD_PRELOAD shim's options, and the processes it serves now.
#include <cstdio>
#include <iostream>

#include "base/log.h"
#include "base/options.h"
#include "base/size.h"
#include "base/table.h"
#include "cli/command.h"
#include "cli/shim_view.h"
#include "shim/shim_registry.h"

namespace hugepin::cli {
namespace {

Json env_json(const std::vector<EffectiveOption>& rows) {
  Json options = Json::array();
  for (const EffectiveOption& row : rows) {
    Json option{{"variable", row.spec->variable},
                {"type", type_name(row.spec->type)},
                {"default", row.spec->default_value},
                {"value", row.present ? Json(row.raw) : Json(nullptr)},
                {"valid", row.problem.empty()},
                {"effective", row.effective},
                {"doc", row.spec->doc}};
    if (!row.spec->choices.empty()) option["choices"] = row.spec->choices;
    options.push_back(std::move(option));
  }
  return Json{{"options", options}};
}

int run_env(bool json) {
  std::vector<EffectiveOption> rows = effective_options(environment_source(), kShimScope);
  if (json) {
    print_json(env_json(rows));
  } else {
    Table table({"VARIABLE", "DEFAULT", "VALUE", "DESCRIPTION"},
                {Table::Align::kLeft, Table::Align::kLeft, Table::Align::kLeft, Table::Align::kLeft});
    for (const EffectiveOption& row : rows) {
      std::string value = row.present ? row.raw + (row.problem.empty() ? "" : " (invalid)") : "-";
      std::string fallback = row.spec->default_value.empty() ? std::string("-") : std::string(row.spec->default_value);
      table.add_row({std::string(row.spec->variable), fallback, value, std::string(row.spec->doc)});
    }
    std::cout << table.render();
  }
  for (const EffectiveOption& row : rows) {
    if (!row.problem.empty()) log::warn(row.problem);
  }
  return 0;
}

int run_list(bool json) {
  std::vector<std::string> problems;
  Options options = Options::parse(environment_source(), &problems, kShimScope);
  for (const std::string& problem : problems) log::warn(problem);
  std::vector<ShimTable> tables = list_shim_tables(real_os(), options.text(Option::kShmDir));
  if (json) {
    print_json(shim_tables_json(tables));
  } else if (tables.empty()) {
    std::cout << "no processes run the shim (no tables in " << options.text(Option::kShmDir) << ")\n";
  } else {
    std::cout << shim_tables_table(tables);
  }
  return 0;
}

}  // namespace

void add_shim_commands(CLI::App& app, Context& context) {
  CLI::App* shim = app.add_subcommand("shim", "The LD_PRELOAD shim (libhugepin_preload.so): options and processes");
  shim->require_subcommand(1);

  auto env_json_flag = std::make_shared<bool>(false);
  CLI::App* env = shim->add_subcommand("env", "List every HUGEPIN_* option: default, value here, meaning");
  env->add_flag("--json", *env_json_flag, "Print JSON (documented in docs/commands.md)");
  env->callback([&context, env_json_flag] { context.action = [env_json_flag] { return run_env(*env_json_flag); }; });

  auto list_json_flag = std::make_shared<bool>(false);
  CLI::App* list = shim->add_subcommand("list", "List the processes the shim serves and their allocations");
  list->add_flag("--json", *list_json_flag, "Print JSON (documented in docs/commands.md)");
  list->callback([&context, list_json_flag] { context.action = [list_json_flag] { return run_list(*list_json_flag); }; });
}

}  // namespace hugepin::cli
