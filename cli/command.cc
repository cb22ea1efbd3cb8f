#include "cli/command.h"

#include <cmath>
#include <cstdlib>
#include <iostream>

#include "base/size.h"
#include "hugemem/naming.h"

namespace hugepin::cli {

Os& Context::os() {
  if (sysroot == "/" || sysroot.empty()) return real_os();
  if (!rooted_os) rooted_os = make_rooted_os(sysroot);
  return *rooted_os;
}

void run_when_chosen(CLI::App* command, Context& context, std::function<int()> run) {
  command->callback([&context, run = std::move(run)] { context.action = run; });
}

CLI::Validator size_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (parse_size(text)) return "";
        return "'" + text + "' is not a size (examples: 4G, 512M, 2MiB, 1073741824)";
      },
      "SIZE");
}

uint64_t size_value(const std::string& text) {
  std::optional<uint64_t> bytes = parse_size(text);
  if (!bytes) throw UsageError(cat("'", text, "' is not a size"));
  return *bytes;
}

CLI::Validator page_size_validator(bool allow_auto) {
  return CLI::Validator(
      [allow_auto](std::string& text) -> std::string {
        if (allow_auto && text == "auto") return "";
        std::optional<uint64_t> size = parse_size(text);
        if (size && (*size == 4 * kKiB || *size == 2 * kMiB || *size == kGiB)) return "";
        return "'" + text + "' is not a page size (use 4K, 2M or 1G" + (allow_auto ? ", or auto)" : ")");
      },
      allow_auto ? "4K|2M|1G|auto" : "4K|2M|1G");
}

uint64_t page_size_value(const std::string& text) {
  if (text == "auto") return 0;
  return size_value(text);
}

CLI::Validator finite_range(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || end == nullptr || *end != '\0' || !std::isfinite(value)) {
          return cat("'", text, "' is not a finite number");
        }
        if (value < min || value > max) return cat("'", text, "' is not in [", min, ", ", max, "]");
        return "";
      },
      cat("NUMBER in [", min, ", ", max, "]"));
}

CLI::Validator arena_name_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (is_valid_arena_name(text)) return "";
        return cat("'", text, "' is not an arena name: use 1-", kMaxArenaNameLength,
                   " letters, digits, '.', '_' or '-', not starting with '.'");
      },
      "NAME");
}

void print_json(const Json& json) { std::cout << json.dump(2) << "\n"; }

}  // namespace hugepin::cli
