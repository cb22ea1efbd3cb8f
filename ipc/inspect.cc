#include "ipc/inspect.h"

#include "base/error.h"
#include "base/process.h"
#include "ipc/arena_control.h"
#include "ipc/owner_word.h"

namespace hugepin {
namespace {

RankSnapshot snapshot_rank(Os& os, const ParsedSegment& view, uint32_t rank) {
  const RegionRecord& record = view.regions[rank];
  const ReportRing& ring = *view.rings[rank];
  RankSnapshot snapshot;
  snapshot.rank = rank;
  snapshot.tp_rank = record.tp_rank;
  snapshot.pp_rank = record.pp_rank;
  snapshot.node_requested = record.node_requested;
  snapshot.node_obtained = record.node_obtained;
  snapshot.page_size = record.page_size;
  snapshot.bytes = record.bytes;
  snapshot.payload_bytes_per_block = record.payload_bytes_per_block;
  snapshot.chunk_count = record.chunk_count;
  snapshot.backing_path = std::string(view.backing_paths[rank]);
  snapshot.status = read_rank_status(os, record);
  snapshot.ring_capacity = ring.capacity();
  // Consumed first: posted, read later, is not below it, except for a batch a killed worker numbered
  // but did not count, until the next worker takes the ring over (ipc/report_ring.h).
  snapshot.reports_consumed = ring.consumed();
  snapshot.reports_posted = ring.produced();
  snapshot.ring_depth = ring.depth();
  return snapshot;
}

}  // namespace

ArenaSnapshot snapshot_segment(Os& os, const ParsedSegment& view) {
  ArenaSnapshot snapshot;
  snapshot.taken_ns = os.monotonic_ns();
  snapshot.name = view.header.arena;
  snapshot.header = view.header;
  // Acquire pairs with the fetch_add of ArenaControl::adopt.
  snapshot.generation = view.block->generation.load(std::memory_order_acquire);
  snapshot.creator_alive = is_process_alive(os, view.header.creator_pid, view.header.creator_start_ticks);
  // Acquire pairs with the compare-and-swaps of the scheduler role in ArenaControl.
  const uint64_t scheduler = view.counters->owner.load(std::memory_order_acquire);
  snapshot.scheduler_pid = owner_pid(scheduler);
  snapshot.scheduler_alive = owner_alive(os, scheduler);
  snapshot.scheduler = read_scheduler_figures(*view.counters);
  snapshot.plan_bytes = view.plan_json.size();
  for (uint32_t rank = 0; rank < view.header.rank_count; ++rank) snapshot.ranks.push_back(snapshot_rank(os, view, rank));
  return snapshot;
}

ArenaSnapshot inspect_arena(Os& os, std::string_view name) {
  ControlSegment segment = ControlSegment::open(os, name, SegmentAccess::kReadOnly);
  ArenaSnapshot snapshot = snapshot_segment(os, segment.view());
  snapshot.path = segment.path();
  snapshot.owner_uid = segment.owner_uid();
  snapshot.owner_gid = segment.owner_gid();
  snapshot.mode = segment.mode();
  return snapshot;
}

std::vector<InspectEntry> inspect_arenas(Os& os, const ArenaOptions& where) {
  std::vector<InspectEntry> entries;
  for (const ArenaEntry& arena : list_arenas_with_control(os, where)) {
    InspectEntry entry;
    entry.name = arena.name;
    if (!arena.control) {
      entry.error = cat("no control segment (", arena.regions.size(),
                        " data files only: an arena made without one, or a crash; hugepin arena destroy ", arena.name,
                        " removes them)");
    } else {
      try {
        entry.snapshot = inspect_arena(os, arena.name);
      } catch (const Error& error) {
        entry.error = error.what();
      }
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::vector<double> ring_rates(const ArenaSnapshot& before, const ArenaSnapshot& after) {
  if (before.name != after.name || before.header.created_realtime_ns != after.header.created_realtime_ns ||
      before.ranks.size() != after.ranks.size() || after.taken_ns <= before.taken_ns) {
    return {};
  }
  const double seconds = static_cast<double>(after.taken_ns - before.taken_ns) / 1e9;
  std::vector<double> rates;
  for (size_t i = 0; i < after.ranks.size(); ++i) {
    const uint64_t from = before.ranks[i].reports_posted;
    const uint64_t to = after.ranks[i].reports_posted;
    rates.push_back(to >= from ? static_cast<double>(to - from) / seconds : 0.0);
  }
  return rates;
}

}  // namespace hugepin
