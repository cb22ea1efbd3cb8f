#include "daemon/refusal_log.h"

#include "base/duration.h"
#include "base/error.h"

namespace hugepin::daemon {

std::optional<std::string> RefusalLog::note(uid_t uid, std::string_view line, int64_t now_ns) {
  auto [it, first] = entries_.try_emplace(uid);
  Entry& entry = it->second;
  if (!first && now_ns - entry.logged_ns < interval_ns_) {
    ++entry.held_back;
    return std::nullopt;
  }
  std::string text(line);
  if (entry.held_back > 0) {
    text += cat(" (and ", entry.held_back, " more lines about uid ", uid, " held back in the last ",
                format_duration(now_ns - entry.logged_ns), ")");
  }
  entry = {now_ns, 0};
  return text;
}

}  // namespace hugepin::daemon
