// Refusals logged at most once per uid per interval, the held-back ones counted (issue 20, item 6:
// a flood of 431,841 lines in 20 s). The test plays the clock.
#include "daemon/refusal_log.h"

#include <doctest/doctest.h>

namespace hugepin::daemon {

constexpr int64_t kSecond = 1'000'000'000;

TEST_CASE("a flood of refusals from one uid makes one line per interval; other uids are not held back") {
  RefusalLog log(10 * kSecond);
  int lines = 0;
  for (int i = 0; i < 2000; ++i) lines += log.note(65534, "refused pid 7 uid 65534: busy", i * 1000).has_value() ? 1 : 0;
  CHECK(lines == 1);
  CHECK(log.note(1000, "refused pid 8 uid 1000: busy", kSecond) == "refused pid 8 uid 1000: busy");
  CHECK(log.note(65534, "refused pid 7 uid 65534: busy", 9 * kSecond) == std::nullopt);
  CHECK(log.note(65534, "refused pid 7 uid 65534: busy", 10 * kSecond) ==
        "refused pid 7 uid 65534: busy (and 2000 more lines about uid 65534 held back in the last 10s)");
  CHECK(log.note(65534, "refused pid 7 uid 65534: busy", 21 * kSecond) == "refused pid 7 uid 65534: busy");
}

}  // namespace hugepin::daemon
