// hugepin metrics: the exposition checked line by line against the Prometheus text format
// (0.0.4) and the lint rules promtool applies, by a strict checker of our own (Debian's prometheus
// package, which brings promtool, is a 96 MB server: too heavy for a test dependency). The
// checker's own failures are tested too, so it cannot pass everything.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "ipc/inspect.h"
#include "ipc/metrics.h"
#include "ipc/rank_attachment.h"
#include "ipc/test_arena.h"

namespace hugepin {
namespace {

// [a-zA-Z_:][a-zA-Z0-9_:]* for metric names (colons allowed), [a-zA-Z_][a-zA-Z0-9_]* for labels.
bool valid_name(const std::string& name, bool colons) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])) != 0) return false;
  return std::all_of(name.begin(), name.end(), [colons](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || (colons && c == ':');
  });
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A unit that is not a base unit or is abbreviated (promtool's lint), with or without _total.
bool has_non_base_unit(const std::string& name) {
  const std::string base = ends_with(name, "_total") ? name.substr(0, name.size() - 6) : name;
  for (const char* unit : {"_ms", "_sec", "_secs", "_us", "_ns", "_kb", "_mb", "_gb", "_kib", "_mib", "_gib", "_b",
                           "_byte", "_milliseconds", "_microseconds", "_nanoseconds", "_kilobytes", "_megabytes",
                           "_gigabytes", "_minutes", "_hours"}) {
    if (ends_with(base, unit)) return true;
  }
  return false;
}

bool valid_number(const std::string& text) {
  if (text == "+Inf" || text == "-Inf" || text == "NaN") return true;
  char* end = nullptr;
  std::strtod(text.c_str(), &end);
  return !text.empty() && *end == '\0';
}

// Parses `{a="x",b="y"}` from `text` at `pos`; appends "name=value" to labels. Returns false when
// malformed (bad name, unescaped or unknown escape, missing quote or comma).
bool parse_labels(const std::string& text, size_t& pos, std::vector<std::string>& labels, std::string& why) {
  ++pos;  // '{'
  while (pos < text.size() && text[pos] != '}') {
    size_t eq = text.find('=', pos);
    if (eq == std::string::npos) return why = "label without '='", false;
    std::string name = text.substr(pos, eq - pos);
    if (!valid_name(name, false) || name.rfind("__", 0) == 0) return why = "bad label name '" + name + "'", false;
    if (eq + 1 >= text.size() || text[eq + 1] != '"') return why = "label value not quoted", false;
    std::string value;
    size_t i = eq + 2;
    for (; i < text.size() && text[i] != '"'; ++i) {
      if (text[i] == '\\') {
        if (i + 1 >= text.size() || (text[i + 1] != '\\' && text[i + 1] != '"' && text[i + 1] != 'n')) {
          return why = "bad escape in label value", false;
        }
        ++i;
      }
      value += text[i];
    }
    if (i >= text.size()) return why = "unterminated label value", false;
    labels.push_back(name + "=" + value);
    pos = i + 1;
    if (pos < text.size() && text[pos] == ',') ++pos;
    else if (pos >= text.size() || text[pos] != '}') return why = "expected ',' or '}'", false;
  }
  if (pos >= text.size()) return why = "unterminated label set", false;
  ++pos;  // '}'
  std::set<std::string> names;
  for (const std::string& label : labels) {
    if (!names.insert(label.substr(0, label.find('='))).second) return why = "repeated label name", false;
  }
  return true;
}

// Every problem with `text` as a textfile-collector exposition; empty when it is valid.
std::vector<std::string> check_exposition(const std::string& text) {
  std::vector<std::string> problems;
  auto problem = [&](size_t line_number, const std::string& message) {
    problems.push_back("line " + std::to_string(line_number) + ": " + message);
  };
  if (text.empty() || text.back() != '\n') problems.push_back("does not end with a newline");
  std::map<std::string, std::string> types;
  std::set<std::string> helps;
  std::set<std::string> finished;  // families whose samples ended
  std::set<std::string> series;
  std::string current;
  std::istringstream in(text);
  std::string line;
  size_t number = 0;
  auto enter = [&](const std::string& family) {
    if (family == current) return;
    if (!current.empty()) finished.insert(current);
    if (finished.count(family) != 0) problem(number, "family " + family + " is split");
    current = family;
  };
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) {
      problem(number, "empty line");
      continue;
    }
    if (line[0] == '#') {
      std::istringstream words(line);
      std::string hash, keyword, name;
      words >> hash >> keyword >> name;
      if (keyword != "HELP" && keyword != "TYPE") continue;  // a comment
      if (!valid_name(name, true)) problem(number, "bad metric name '" + name + "'");
      enter(name);
      std::string rest;
      std::getline(words, rest);
      if (keyword == "HELP") {
        if (!helps.insert(name).second) problem(number, "second HELP for " + name);
        if (rest.size() < 2) problem(number, "empty HELP for " + name);
      } else {
        std::string type = rest.empty() ? "" : rest.substr(1);
        if (type != "counter" && type != "gauge" && type != "untyped" && type != "summary" && type != "histogram") {
          problem(number, "bad type '" + type + "'");
        }
        if (types.count(name) != 0) problem(number, "second TYPE for " + name);
        if (series.count(name) != 0 || std::any_of(series.begin(), series.end(), [&](const std::string& s) {
              return s.rfind(name + "{", 0) == 0;
            })) {
          problem(number, "TYPE after samples of " + name);
        }
        types[name] = type;
        if (type == "counter" && !ends_with(name, "_total")) problem(number, "counter " + name + " lacks _total");
        if (type != "counter" && ends_with(name, "_total")) {
          problem(number, "non-counter " + name + " ends in _total");
        }
      }
      if (name.rfind("hugepin_", 0) != 0) problem(number, name + " lacks the hugepin_ prefix");
      if (has_non_base_unit(name)) problem(number, name + " has a unit that is not a base unit");
      continue;
    }
    size_t pos = 0;
    while (pos < line.size() && line[pos] != '{' && line[pos] != ' ') ++pos;
    std::string name = line.substr(0, pos);
    if (!valid_name(name, true)) {
      problem(number, "bad metric name '" + name + "'");
      continue;
    }
    std::vector<std::string> labels;
    std::string why;
    if (pos < line.size() && line[pos] == '{' && !parse_labels(line, pos, labels, why)) {
      problem(number, why);
      continue;
    }
    if (pos >= line.size() || line[pos] != ' ') {
      problem(number, "no value");
      continue;
    }
    std::string value = line.substr(pos + 1);
    if (value.find(' ') != std::string::npos) problem(number, "a timestamp (the textfile collector refuses them)");
    else if (!valid_number(value)) problem(number, "bad value '" + value + "'");
    enter(name);
    if (types.count(name) == 0) problem(number, "sample of " + name + " before its TYPE");
    if (helps.count(name) == 0) problem(number, "sample of " + name + " without HELP");
    std::sort(labels.begin(), labels.end());
    std::string key = name + "{";
    for (const std::string& label : labels) key += label + ",";
    if (!series.insert(key).second) problem(number, "repeated series " + key);
    if (types[name] == "counter" && valid_number(value) && std::strtod(value.c_str(), nullptr) < 0) {
      problem(number, "negative counter");
    }
  }
  return problems;
}

std::string joined(const std::vector<std::string>& problems) {
  std::string text;
  for (const std::string& problem : problems) text += problem + "\n";
  return text;
}

}  // namespace

TEST_CASE("the checker refuses what promtool would") {
  const std::string good = "# HELP hugepin_x_total X.\n# TYPE hugepin_x_total counter\nhugepin_x_total{a=\"1\"} 3\n";
  CHECK(check_exposition(good).empty());
  CHECK_FALSE(check_exposition("# HELP hugepin_x X.\n# TYPE hugepin_x counter\nhugepin_x 3\n").empty());  // no _total
  CHECK_FALSE(check_exposition("hugepin_x_total 3\n").empty());  // no TYPE, no HELP
  CHECK_FALSE(check_exposition(good + "hugepin_x_total{a=\"1\"} 4\n").empty());  // repeated series
  CHECK_FALSE(check_exposition(good.substr(0, good.size() - 1)).empty());        // no final newline
  CHECK_FALSE(check_exposition(good + "# HELP hugepin_y Y.\n# TYPE hugepin_y gauge\nhugepin_y 1\nhugepin_x_total{a=\"2\"} 1\n").empty());  // split family
  CHECK_FALSE(check_exposition("# HELP hugepin_y Y.\n# TYPE hugepin_y gauge\nhugepin_y{a=\"x\\q\"} 1\n").empty());  // bad escape
  CHECK_FALSE(check_exposition("# HELP hugepin_y Y.\n# TYPE hugepin_y gauge\nhugepin_y{a=x} 1\n").empty());  // unquoted
  CHECK_FALSE(check_exposition("# HELP hugepin_y Y.\n# TYPE hugepin_y gauge\nhugepin_y 1 1700000000\n").empty());  // timestamp
  CHECK_FALSE(check_exposition("# HELP hugepin_y_ms Y.\n# TYPE hugepin_y_ms gauge\nhugepin_y_ms 1\n").empty());  // unit
  CHECK_FALSE(check_exposition("# HELP y Y.\n# TYPE y gauge\ny 1\n").empty());  // prefix
  CHECK_FALSE(check_exposition("# HELP hugepin_y Y.\n# TYPE hugepin_y gauge\nhugepin_y one\n").empty());  // value
}

TEST_CASE("metrics of live arenas and of an unreadable one form a valid exposition") {
  test::TestArena arena("metrics", test::small_layout(2, 1));
  ArenaControl scheduler = ArenaControl::adopt(real_os(), arena.name());
  RankAttachment worker = test::attach_rank(arena, 1, 0);
  worker.post(ReportKind::kCopyComplete, 1);
  worker.set_pinned_bytes(8192);
  scheduler.publish(PublishedFigures{5, 1, 2, 0, 10, 1, 40, 2});

  std::vector<InspectEntry> entries = {InspectEntry{arena.name(), inspect_arena(real_os(), arena.name()), ""},
                                       InspectEntry{"broken\"arena", std::nullopt, "no control block"}};
  const std::string text = metrics_text(entries, real_os().monotonic_ns());
  std::vector<std::string> problems = check_exposition(text);
  CHECK_MESSAGE(problems.empty(), joined(problems));

  const std::string rank1 = cat("{arena=\"", arena.name(), "\",rank=\"1\",tp_rank=\"1\",pp_rank=\"0\",node=\"");
  auto has = [&](const std::string& part) { return text.find(part) != std::string::npos; };
  CHECK(has(cat("hugepin_arena_up{arena=\"", arena.name(), "\"} 1\n")));
  CHECK(has("hugepin_arena_up{arena=\"broken\\\"arena\"} 0\n"));
  // Every scheduler figure under its name, type and help (dashboards use them; they come from
  // protocol/scheduler_figures.h), with the value published in that place.
  const std::vector<std::vector<std::string>> figures = {
      {"hugepin_scheduler_pinned_chunks", "gauge", "Chunks holding at least one copy pin.", "5"},
      {"hugepin_scheduler_jobs_waiting_quorum", "gauge", "Copy jobs not yet reported complete by every rank.", "1"},
      {"hugepin_scheduler_retired_chunks_waiting_fence", "gauge", "Retired chunks waiting for the compute fence.", "2"},
      {"hugepin_scheduler_dead_ranks", "gauge", "Ranks whose worker died and was not replaced.", "0"},
      {"hugepin_scheduler_jobs_completed_total", "counter", "Copy jobs that reached quorum.", "10"},
      {"hugepin_scheduler_jobs_failed_total", "counter", "Copy jobs that can never reach quorum.", "1"},
      {"hugepin_scheduler_reports_applied_total", "counter", "Reports the scheduler acted on.", "40"},
      {"hugepin_scheduler_reports_rejected_total", "counter", "Reports the scheduler refused.", "2"}};
  for (const std::vector<std::string>& figure : figures) {
    CHECK_MESSAGE(has(cat("# HELP ", figure[0], " ", figure[2], "\n# TYPE ", figure[0], " ", figure[1], "\n", figure[0],
                          "{arena=\"", arena.name(), "\"} ", figure[3], "\n")),
                  figure[0]);
  }
  CHECK(has(cat("hugepin_scheduler_alive{arena=\"", arena.name(), "\"} 1\n")));
  CHECK(has("hugepin_rank_attached" + rank1));
  CHECK(has(cat("hugepin_rank_pid", rank1)));
  CHECK(has(cat(",state=\"attached\"} 1\n")));
  CHECK(has(cat("hugepin_ring_reports_posted_total", rank1)));
  CHECK(has("# TYPE hugepin_ring_reports_posted_total counter\n"));
  CHECK(has("# TYPE hugepin_region_bytes gauge\n"));
  size_t attached_line = text.find("hugepin_rank_attached" + rank1);
  REQUIRE(attached_line != std::string::npos);
  CHECK(text.substr(text.find('}', attached_line), 4) == "} 1\n");
  size_t pinned_line = text.find("hugepin_region_pinned_bytes" + rank1);
  REQUIRE(pinned_line != std::string::npos);
  CHECK(text.substr(text.find('}', pinned_line), 7) == "} 8192\n");
}

TEST_CASE("no arenas: an empty exposition is valid for the textfile collector") {
  CHECK(metrics_text({}, real_os().monotonic_ns()).empty());
  CHECK(escape_label_value("a\\b\"c\nd") == "a\\\\b\\\"c\\nd");
}

}  // namespace hugepin
