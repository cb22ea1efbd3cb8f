#include "ipc/metrics.h"

#include <cstdio>
#include <deque>
#include <sstream>
#include <vector>

#include "base/error.h"
#include "ipc/control_layout.h"
#include "ipc/scheduler_counters.h"

namespace hugepin {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

// One metric family: its header once, then every sample of every arena.
class Family {
 public:
  Family(std::string name, std::string type, std::string help)
      : name_(std::move(name)), type_(std::move(type)), help_(std::move(help)) {}

  void add(const Labels& labels, double value) {
    out_ << name_;
    if (!labels.empty()) {
      out_ << '{';
      for (size_t i = 0; i < labels.size(); ++i) {
        out_ << (i == 0 ? "" : ",") << labels[i].first << "=\"" << escape_label_value(labels[i].second) << '"';
      }
      out_ << '}';
    }
    char number[64];
    std::snprintf(number, sizeof number, "%.17g", value);
    out_ << ' ' << number << '\n';
    ++samples_;
  }

  // The family's text; "" when it has no sample.
  std::string text() const {
    if (samples_ == 0) return "";
    return cat("# HELP ", name_, " ", help_, "\n# TYPE ", name_, " ", type_, "\n", out_.str());
  }

 private:
  std::string name_;
  std::string type_;
  std::string help_;
  std::ostringstream out_;
  size_t samples_ = 0;
};

double number(uint64_t value) { return static_cast<double>(value); }

Labels rank_labels(const std::string& arena, const RankSnapshot& rank) {
  return {{"arena", arena},
          {"rank", std::to_string(rank.rank)},
          {"tp_rank", std::to_string(rank.tp_rank)},
          {"pp_rank", std::to_string(rank.pp_rank)},
          {"node", rank.node_obtained < 0 ? std::string("none") : std::to_string(rank.node_obtained)}};
}

// hugepin_scheduler_<name>, with "_total" for a counter (Prometheus' naming).
std::string figure_metric(const PublishedFigure& figure) {
  return cat("hugepin_scheduler_", figure.name, figure.kind == FigureKind::kCounter ? "_total" : "");
}

constexpr RankState kStates[] = {RankState::kCreated, RankState::kAttached, RankState::kPinning,
                                 RankState::kReady,   RankState::kDetached, RankState::kDead};

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string escaped;
  for (char c : value) {
    if (c == '\\') escaped += "\\\\";
    else if (c == '"') escaped += "\\\"";
    else if (c == '\n') escaped += "\\n";
    else escaped += c;
  }
  return escaped;
}

std::string metrics_text(const std::vector<InspectEntry>& entries, int64_t now_ns) {
  std::deque<Family> families;  // a deque: references to earlier families stay valid
  auto family = [&](std::string name, std::string type, std::string help) -> Family& {
    return families.emplace_back(std::move(name), std::move(type), std::move(help));
  };
  Family& up = family("hugepin_arena_up", "gauge", "1 when the arena's control segment could be read and checked, else 0.");
  Family& info = family("hugepin_arena_info", "gauge", "Constant 1, labelled with the arena's layout version and creator.");
  Family& created = family("hugepin_arena_created_timestamp_seconds", "gauge", "When the arena was created (Unix time).");
  Family& generation = family("hugepin_arena_generation", "gauge", "Bumped by each scheduler that adopts the arena, and by hugepind when it adopts it.");
  Family& ranks = family("hugepin_arena_ranks", "gauge", "Rank regions in the arena (tp * pp).");
  Family& chunks = family("hugepin_arena_chunks", "gauge", "Chunks per rank, common to every rank.");
  Family& blocks = family("hugepin_arena_blocks_per_chunk", "gauge", "KV blocks per chunk.");
  Family& segment = family("hugepin_arena_control_segment_bytes", "gauge", "Size of the control segment.");
  Family& scheduler_up = family("hugepin_scheduler_alive", "gauge", "1 when a live process holds the scheduler role.");
  std::vector<Family*> figures;  // in the order of kPublishedFigures
  for (const PublishedFigure& figure : kPublishedFigures) {
    figures.push_back(&family(figure_metric(figure), figure.kind == FigureKind::kCounter ? "counter" : "gauge",
                              std::string(figure.help)));
  }
  Family& torn = family("hugepin_scheduler_figures_torn", "gauge", "1 when the scheduler figures were read mid-write.");
  Family& bytes = family("hugepin_region_bytes", "gauge", "Size of the rank's region.");
  Family& page = family("hugepin_region_page_size_bytes", "gauge", "Page size backing the rank's region.");
  Family& payload = family("hugepin_region_payload_bytes_per_block", "gauge", "The rank's bytes of one KV block.");
  Family& requested = family("hugepin_region_node_requested", "gauge", "NUMA node the region was asked for (-1: none).");
  Family& on_node = family("hugepin_region_on_requested_node", "gauge", "1 when most pages are on the requested node (or none was requested).");
  Family& pinned = family("hugepin_region_pinned_bytes", "gauge", "Bytes of the region registered for the GPU.");
  Family& attached = family("hugepin_rank_attached", "gauge", "1 when a live worker holds the rank.");
  Family& pid = family("hugepin_rank_pid", "gauge", "Pid of the worker that holds or last held the rank (0: none).");
  Family& state = family("hugepin_rank_state", "gauge", "1 for the rank's current state.");
  Family& attaches = family("hugepin_rank_attaches_total", "counter", "Workers that attached to the rank.");
  Family& takeovers = family("hugepin_rank_takeovers_total", "counter", "Attaches that replaced a dead worker.");
  Family& heartbeat = family("hugepin_rank_heartbeat_age_seconds", "gauge", "Time since the rank's worker last beat.");
  Family& capacity = family("hugepin_ring_capacity", "gauge", "Reports the rank's ring holds.");
  Family& depth = family("hugepin_ring_depth", "gauge", "Reports waiting in the rank's ring.");
  Family& posted = family("hugepin_ring_reports_posted_total", "counter", "Reports the rank's worker posted.");
  Family& consumed = family("hugepin_ring_reports_consumed_total", "counter", "Reports the scheduler took from the ring.");

  for (const InspectEntry& entry : entries) {
    const Labels arena = {{"arena", entry.name}};
    up.add(arena, entry.snapshot ? 1 : 0);
    if (!entry.snapshot) continue;
    const ArenaSnapshot& s = *entry.snapshot;
    info.add({{"arena", entry.name},
              {"layout_version", std::to_string(s.header.layout_version)},
              {"creator_pid", std::to_string(s.header.creator_pid)},
              {"creator_uid", std::to_string(s.header.creator_uid)}},
             1);
    created.add(arena, static_cast<double>(s.header.created_realtime_ns) / 1e9);
    generation.add(arena, number(s.generation));
    ranks.add(arena, s.header.rank_count);
    chunks.add(arena, number(s.header.chunk_count));
    blocks.add(arena, number(s.header.blocks_per_chunk));
    segment.add(arena, number(s.header.segment_bytes));
    scheduler_up.add(arena, s.scheduler_alive ? 1 : 0);
    for (size_t i = 0; i < figures.size(); ++i) figures[i]->add(arena, number(s.scheduler.figures.*kPublishedFields[i]));
    torn.add(arena, s.scheduler.consistent ? 0 : 1);
    for (const RankSnapshot& rank : s.ranks) {
      const Labels labels = rank_labels(entry.name, rank);
      bytes.add(labels, number(rank.bytes));
      page.add(labels, number(rank.page_size));
      payload.add(labels, number(rank.payload_bytes_per_block));
      requested.add(labels, rank.node_requested);
      on_node.add(labels, rank.node_requested < 0 || rank.node_requested == rank.node_obtained ? 1 : 0);
      pinned.add(labels, number(rank.status.pinned_bytes));
      attached.add(labels, rank.status.alive ? 1 : 0);
      pid.add(labels, rank.status.pid);
      for (RankState each : kStates) {
        Labels with_state = labels;
        with_state.emplace_back("state", std::string(rank_state_name(static_cast<uint8_t>(each))));
        state.add(with_state, rank.status.state == static_cast<uint8_t>(each) ? 1 : 0);
      }
      attaches.add(labels, number(rank.status.attach_generation));
      takeovers.add(labels, number(rank.status.takeovers));
      if (rank.status.heartbeat_ns > 0 && now_ns >= rank.status.heartbeat_ns) {
        heartbeat.add(labels, static_cast<double>(now_ns - rank.status.heartbeat_ns) / 1e9);
      }
      capacity.add(labels, rank.ring_capacity);
      depth.add(labels, rank.ring_depth);
      posted.add(labels, number(rank.reports_posted));
      consumed.add(labels, number(rank.reports_consumed));
    }
  }
  std::string text;
  for (const Family& each : families) text += each.text();
  return text;
}

}  // namespace hugepin
