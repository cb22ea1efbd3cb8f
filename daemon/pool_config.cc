#include "daemon/pool_config.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <utility>

#include "base/error.h"
#include "base/size.h"

namespace hugepin::daemon {
namespace {

template <typename Number>
std::optional<Number> whole_number(std::string_view text) {
  Number value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

}  // namespace

PoolEntry parse_pool_entry(std::string_view key, std::string_view pages) {
  PoolEntry entry;
  const size_t dot = key.find('.');
  std::string_view size_text = key.substr(0, dot);
  std::optional<uint64_t> page_size = parse_size(size_text);
  if (!page_size || *page_size <= 4 * kKiB || (*page_size & (*page_size - 1)) != 0) {
    throw Error(cat("pool entry '", key, "': '", size_text, "' is not a hugepage size (use 2M or 1G)"));
  }
  entry.page_size = *page_size;
  if (dot != std::string_view::npos) {
    std::string_view node_text = key.substr(dot + 1);
    std::optional<int> node;
    if (node_text.substr(0, 4) == "node") node = whole_number<int>(node_text.substr(4));
    if (!node || *node < 0) {
      throw Error(cat("pool entry '", key, "': '", node_text, "' is not a node (use node0, node1, ...)"));
    }
    entry.node = node;
  }
  std::optional<uint64_t> count = whole_number<uint64_t>(pages);
  if (!count) throw Error(cat("pool entry '", key, "': '", pages, "' is not a whole number of pages"));
  entry.pages = *count;
  return entry;
}

std::vector<PoolEntry> parse_pool_list(std::string_view text) {
  std::vector<PoolEntry> entries;
  std::set<std::pair<uint64_t, int>> seen;  // (page size, node); node -1: every node
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;
    const size_t equals = item.find('=');
    if (equals == std::string_view::npos) throw Error(cat("pool entry '", item, "': expected SIZE[.nodeN]=PAGES"));
    PoolEntry entry = parse_pool_entry(trim(item.substr(0, equals)), trim(item.substr(equals + 1)));
    const int node = entry.node.value_or(-1);
    const bool clash = seen.count({entry.page_size, node}) != 0 ||
                       (node == -1 ? std::any_of(seen.begin(), seen.end(),
                                                 [&](const auto& s) { return s.first == entry.page_size; })
                                   : seen.count({entry.page_size, -1}) != 0);
    if (clash) {
      throw Error(cat("pool entry '", item, "': ", page_size_name(entry.page_size),
                      " pages are already set for that node (one entry per page size and node)"));
    }
    seen.emplace(entry.page_size, node);
    entries.push_back(entry);
  }
  return entries;
}

std::string format_pool_entry(const PoolEntry& entry) {
  return cat(page_size_name(entry.page_size), entry.node ? cat(".node", *entry.node) : std::string(), "=", entry.pages);
}

std::string format_pool_list(const std::vector<PoolEntry>& entries) {
  std::string text;
  for (const PoolEntry& entry : entries) {
    if (!text.empty()) text += ",";
    text += format_pool_entry(entry);
  }
  return text;
}

std::vector<PoolChange> apply_pool_entries(Os& os, const std::vector<PoolEntry>& entries) {
  std::vector<PoolChange> changes;
  for (const PoolEntry& entry : entries) {
    if (entry.pages > UINT64_MAX / entry.page_size) {
      throw Error(cat("pool entry '", format_pool_entry(entry), "' asks for more bytes than 64 bits hold"));
    }
    for (const PoolChange& change : set_pool(os, entry.pages * entry.page_size, entry.node, entry.page_size)) {
      changes.push_back(change);
    }
  }
  return changes;
}

}  // namespace hugepin::daemon
