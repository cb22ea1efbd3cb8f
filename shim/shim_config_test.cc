#include "shim/shim_config.h"

#include <doctest/doctest.h>

#include <map>

#include "base/size.h"

namespace hugepin {
namespace {

OptionSource map_source(const std::map<std::string, std::string>& values) {
  return [&values](const char* variable) -> const char* {
    auto it = values.find(variable);
    return it == values.end() ? nullptr : it->second.c_str();
  };
}

ShimConfig config_of(const std::map<std::string, std::string>& env, std::vector<std::string>* problems = nullptr) {
  return make_shim_config(Options::parse(map_source(env), problems), map_source(env), problems);
}

}  // namespace

TEST_CASE("the rank comes from HUGEPIN_RANK, then LOCAL_RANK, then RANK, then 0") {
  CHECK(config_of({}).rank == 0);
  CHECK(config_of({}).rank_source == "default");
  CHECK(config_of({{"RANK", "7"}}).rank == 7);
  CHECK(config_of({{"RANK", "7"}, {"LOCAL_RANK", "3"}}).rank == 3);
  ShimConfig config = config_of({{"RANK", "7"}, {"LOCAL_RANK", "3"}, {"HUGEPIN_RANK", "1"}});
  CHECK(config.rank == 1);
  CHECK(config.rank_source == "HUGEPIN_RANK");
  std::vector<std::string> problems;
  config = config_of({{"LOCAL_RANK", "x"}, {"RANK", "2"}}, &problems);
  CHECK(config.rank == 2);
  CHECK(config.rank_source == "RANK");
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "LOCAL_RANK='x' is not a rank from 0 to 65535: ignored");
  problems.clear();
  CHECK(config_of({{"HUGEPIN_RANK", "70000"}, {"RANK", "4"}}, &problems).rank == 4);
  CHECK(problems.size() == 1);
}

TEST_CASE("the other options map to the configuration") {
  ShimConfig config = config_of({{"HUGEPIN_PAGESIZE", "1G"}, {"HUGEPIN_LOG", "quiet"}, {"HUGEPIN_STRICT", "1"},
                                 {"HUGEPIN_ARENA", "kv"}, {"HUGEPIN_MIN_BYTES", "1G"}});
  CHECK(config.page_size == kGiB);
  CHECK(config.log_level == log::Level::kQuiet);
  CHECK(config.strict);
  CHECK(config.arena == "kv");
  CHECK(config.min_bytes == kGiB);
  CHECK_FALSE(config.disabled);
  CHECK(config.shm_dir == "/dev/shm");
  CHECK(config.sysroot == "/");
  CHECK(config_of({}).page_size == 0);
  CHECK(config_of({{"HUGEPIN_PAGESIZE", "2m"}}).page_size == 2 * kMiB);
}

TEST_CASE("auto takes 1 GiB pages only when they round a request up by at most 1/64") {
  std::vector<PageSizeOffer> offers{{2 * kMiB, 200000, true}, {kGiB, 200, true}};
  std::string why;
  CHECK(choose_page_size(3 * kMiB, 0, offers, &why) == 2 * kMiB);
  CHECK(choose_page_size(5 * kGiB + 1, 0, offers, &why) == 2 * kMiB);  // would round up by 1 GiB
  CHECK(choose_page_size(64 * kGiB, 0, offers, &why) == kGiB);         // a whole number of pages
  CHECK(choose_page_size(100 * kGiB + 1, 0, offers, &why) == kGiB);    // 1 GiB is less than 1/64
  // Not enough 1 GiB pages: 2 MiB ones, silently.
  CHECK(choose_page_size(300 * kGiB, 0, offers, &why) == 2 * kMiB);
}

TEST_CASE("a page size asked for is the only one used") {
  std::vector<PageSizeOffer> offers{{2 * kMiB, 10, true}, {kGiB, 2, false}};
  std::string why;
  CHECK(choose_page_size(3 * kMiB, 2 * kMiB, offers, &why) == 2 * kMiB);
  CHECK_FALSE(choose_page_size(3 * kMiB, kGiB, offers, &why));
  CHECK(why == "no hugetlbfs mount for 1G pages (hugepin pool mount --pagesize 1G)");
  CHECK_FALSE(choose_page_size(21 * kMiB, 2 * kMiB, offers, &why));
  CHECK(why == "11 2M pages needed, 10 free (hugepin pool set)");
  CHECK_FALSE(choose_page_size(kMiB, 16 * kGiB, offers, &why));
  CHECK(why == "the kernel has no 16G hugepages");
  CHECK_FALSE(choose_page_size(kMiB, 0, {}, &why));
  CHECK(why == "the kernel offers no hugepage size");
}

}  // namespace hugepin
