#include "bench/scheduler_stalls.h"

#include <algorithm>
#include <iterator>
#include <sstream>
#include <string>

namespace hugepin::bench {

int64_t CollectSpans::outside(int64_t from, int64_t to) const {
  if (to <= from) return 0;
  // The first span that ends after `from`; spans are in order and do not overlap.
  auto it = std::upper_bound(spans_.begin(), spans_.end(), from,
                             [](int64_t at, const CollectSpan& span) { return at < span.end_ns; });
  int64_t inside = 0;
  for (; it != spans_.end() && it->start_ns < to; ++it) {
    inside += std::min(it->end_ns, to) - std::max(it->start_ns, from);
  }
  return (to - from) - inside;
}

int64_t CollectSpans::longest_gap() const {
  int64_t longest = 0;
  for (size_t i = 1; i < spans_.size(); ++i) {
    longest = std::max(longest, spans_[i].start_ns - spans_[i - 1].end_ns);
  }
  return longest;
}

uint64_t CollectSpans::waited_out() const {
  return static_cast<uint64_t>(
      std::count_if(spans_.begin(), spans_.end(), [](const CollectSpan& span) { return span.waited_out; }));
}

std::optional<CollectSpan> CollectSpans::span_at(int64_t at) const {
  auto it = std::upper_bound(spans_.begin(), spans_.end(), at,
                             [](int64_t t, const CollectSpan& span) { return t < span.end_ns; });
  if (it != spans_.begin() && std::prev(it)->end_ns == at) --it;
  if (it == spans_.end() || it->start_ns > at) return std::nullopt;
  return *it;
}

std::optional<SchedStat> read_schedstat(Os& os, const std::string& path) {
  std::string schedstat;
  if (os.read_file(path, &schedstat) != 0) return std::nullopt;
  std::istringstream fields(schedstat);
  SchedStat stat;
  if (!(fields >> stat.run_ns >> stat.wait_ns)) return std::nullopt;
  return stat;
}

MachineCpuTicks machine_cpu_ticks(Os& os) {
  MachineCpuTicks ticks;
  std::string stat;
  if (os.read_file("/proc/stat", &stat) != 0) return ticks;
  // "cpu  user nice system idle iowait irq softirq steal guest guest_nice": guest time is
  // already counted in user and nice.
  std::istringstream line(stat.substr(0, stat.find('\n')));
  std::string name;
  line >> name;
  if (name != "cpu") return ticks;
  uint64_t value = 0;
  for (int field = 1; field <= 8 && line >> value; ++field) {
    ticks.total += value;
    if (field == 8) ticks.steal = value;
  }
  return ticks;
}

double steal_share(const MachineCpuTicks& before, const MachineCpuTicks& after) {
  if (after.total <= before.total) return 0;
  return static_cast<double>(after.steal - before.steal) / static_cast<double>(after.total - before.total);
}

}  // namespace hugepin::bench
