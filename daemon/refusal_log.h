// Lines about refused clients, rate-limited per uid: one client that floods the socket (2,000
// connections held for 20 s made 431,841 lines, 47 MB, in issue 20) must not flood the journal.
// The first refusal of a uid is logged; the next ones within `interval` are held back and
// counted, and the first line after it says how many were.
//
// Thread-safety: one thread (the daemon's loop). The caller gives the clock: tests play it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace hugepin::daemon {

class RefusalLog {
 public:
  static constexpr int64_t kDefaultIntervalNs = 10'000'000'000;

  explicit RefusalLog(int64_t interval_ns = kDefaultIntervalNs) : interval_ns_(interval_ns) {}

  // The line to log for `line` about uid `uid` at `now_ns` (CLOCK_MONOTONIC), or nullopt when it
  // is held back: "refused pid 42 uid 65534: busy (and 1999 more lines about uid 65534 in the
  // last 10 s)".
  std::optional<std::string> note(uid_t uid, std::string_view line, int64_t now_ns);

 private:
  struct Entry {
    int64_t logged_ns = 0;
    uint64_t held_back = 0;
  };

  int64_t interval_ns_;
  std::map<uid_t, Entry> entries_;  // one per uid ever refused: as many as the host has users
};

}  // namespace hugepin::daemon
