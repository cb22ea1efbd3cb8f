#include "base/parallel.h"

#include <doctest/doctest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <string>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace hugepin {

TEST_CASE("every index runs once, each on a thread of its own, and the call waits for all") {
  std::mutex mutex;
  std::vector<int> runs(8, 0);
  std::set<std::thread::id> threads;
  std::atomic<int> set_up{0};
  run_on_threads(
      8,
      [&](unsigned index) {
        std::lock_guard lock(mutex);
        ++runs[index];
        threads.insert(std::this_thread::get_id());
      },
      [&] { ++set_up; });
  CHECK(runs == std::vector<int>(8, 1));
  CHECK(threads.size() == 8);
  CHECK(threads.count(std::this_thread::get_id()) == 0);
  CHECK(set_up.load() == 8);
  run_on_threads(0, [](unsigned) { FAIL("no work was asked for"); });
}

TEST_CASE("a throwing call does not stop the others; the lowest index's exception comes back") {
  std::atomic<int> finished{0};
  auto work = [&](unsigned index) {
    if (index == 1 || index == 3) throw std::runtime_error(index == 1 ? "one" : "three");
    ++finished;
  };
  CHECK_THROWS_WITH_AS(run_on_threads(5, work), "one", std::runtime_error);
  CHECK(finished.load() == 3);
  CHECK_THROWS_WITH_AS(run_on_threads(2, [](unsigned) {}, [] { throw std::runtime_error("setup"); }), "setup",
                       std::runtime_error);
}

TEST_CASE("shares cover the items once, in order, differing by at most one") {
  for (unsigned count : {1u, 3u, 7u}) {
    for (uint64_t total : {0ull, 1ull, 10ull, 1000003ull}) {
      uint64_t next = 0;
      for (unsigned index = 0; index < count; ++index) {
        const Share share = share_of(total, index, count);
        CHECK(share.first == next);
        CHECK(share.last - share.first <= total / count + 1);
        next = share.last;
      }
      CHECK(next == total);
    }
  }
}

TEST_CASE("a thread's name shows in /proc, cut to the kernel's 15 characters") {
  auto comm_after = [](const char* name) {
    std::string comm;
    std::thread([&] {
      name_this_thread(name);
      std::ifstream file("/proc/self/task/" + std::to_string(::syscall(SYS_gettid)) + "/comm");
      std::getline(file, comm);
    }).join();
    return comm;
  };
  CHECK(comm_after("hugepin-landed") == "hugepin-landed");
  CHECK(comm_after("hugepin-a-name-too-long") == "hugepin-a-name-");
}

}  // namespace hugepin
