#include "shim/shim_config.h"

#include <algorithm>
#include <charconv>

#include "base/error.h"
#include "base/size.h"

namespace hugepin {
namespace {

std::optional<uint32_t> parse_rank(std::string_view text) {
  uint32_t rank = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), rank);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || rank > 65535) return std::nullopt;
  return rank;
}

log::Level log_level(const std::string& name) {
  if (name == "quiet") return log::Level::kQuiet;
  if (name == "info") return log::Level::kInfo;
  return log::Level::kWarn;
}

uint64_t pages_for(uint64_t bytes, uint64_t page_size) { return bytes / page_size + (bytes % page_size != 0 ? 1 : 0); }

}  // namespace

ShimConfig make_shim_config(const Options& options, const OptionSource& source, std::vector<std::string>* problems) {
  ShimConfig config;
  config.disabled = options.flag(Option::kDisable);
  config.min_bytes = options.size(Option::kMinBytes);
  config.arena = options.text(Option::kArena);
  const std::string& page_size = options.text(Option::kPageSize);
  config.page_size = page_size == "auto" ? 0 : parse_size(page_size).value_or(0);
  config.hugetlbfs_dir = options.text(Option::kHugetlbfsDir);
  config.shm_dir = options.text(Option::kShmDir);
  config.strict = options.flag(Option::kStrict);
  config.log_level = log_level(options.text(Option::kLog));
  config.sysroot = options.text(Option::kSysroot);

  config.rank_source = "default";
  if (options.is_set(Option::kRank)) {
    config.rank = static_cast<uint32_t>(options.integer(Option::kRank));
    config.rank_source = "HUGEPIN_RANK";
    return config;
  }
  for (const char* variable : {"LOCAL_RANK", "RANK"}) {
    const char* text = source(variable);
    if (text == nullptr || *text == '\0') continue;
    if (std::optional<uint32_t> rank = parse_rank(text)) {
      config.rank = *rank;
      config.rank_source = variable;
      return config;
    }
    if (problems != nullptr) problems->push_back(cat(variable, "='", text, "' is not a rank from 0 to 65535: ignored"));
  }
  return config;
}

std::optional<uint64_t> choose_page_size(uint64_t bytes, uint64_t wanted, const std::vector<PageSizeOffer>& offers,
                                         std::string* why) {
  std::vector<PageSizeOffer> sorted = offers;
  std::sort(sorted.begin(), sorted.end(),
            [](const PageSizeOffer& a, const PageSizeOffer& b) { return a.page_size > b.page_size; });
  std::string reasons;
  auto note = [&](std::string reason) { reasons += cat(reasons.empty() ? "" : "; ", reason); };
  for (const PageSizeOffer& offer : sorted) {
    if (wanted != 0 && offer.page_size != wanted) continue;
    const std::string name = page_size_name(offer.page_size);
    const uint64_t pages = pages_for(bytes, offer.page_size);
    const bool smallest = &offer == &sorted.back();
    if (wanted == 0 && !smallest && (pages * offer.page_size - bytes) > bytes / 64) continue;  // rounds too much
    if (!offer.mounted) {
      note(cat("no hugetlbfs mount for ", name, " pages (hugepin pool mount --pagesize ", name, ")"));
    } else if (offer.free_pages < pages) {
      note(cat(pages, " ", name, " pages needed, ", offer.free_pages, " free (hugepin pool set)"));
    } else {
      return offer.page_size;
    }
  }
  if (reasons.empty()) {
    reasons = wanted != 0 ? cat("the kernel has no ", page_size_name(wanted), " hugepages")
                          : std::string("the kernel offers no hugepage size");
  }
  *why = reasons;
  return std::nullopt;
}

}  // namespace hugepin
