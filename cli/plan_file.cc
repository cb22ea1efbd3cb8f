#include "cli/plan_file.h"

#include <cerrno>

#include "base/error.h"
#include "base/trusted_file.h"
#include "session/host_plan.h"

namespace hugepin::cli {
namespace {

// A plan input is a few kilobytes of JSON; anything past this is not one.
constexpr uint64_t kMaxPlanInputBytes = 16 << 20;

// A plan names many things a root process then makes: opened as base/trusted_file.h says (a
// FIFO, a device or a link is refused, another user's file too), and read up to the limit.
std::string read_text_file(Os& os, const std::string& path) {
  return read_trusted_file(os, user_named(path), {FileType::kRegular, FileOwners::kTrusted, "plan input"},
                           kMaxPlanInputBytes);
}

}  // namespace

planner::CapacityPlan plan_from_file(Os& os, const std::string& path) {
  std::string text = read_text_file(os, path);
  try {
    return plan_on_host(os, text);
  } catch (const Error& error) {
    throw Error(cat(path, ": ", error.what()), error.errno_value());
  }
}

}  // namespace hugepin::cli
