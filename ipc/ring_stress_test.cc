// Ring stress across processes: one forked producer per ring, this process consumes and checks.
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <exception>

#include "ipc/ring_stress.h"

namespace hugepin {
namespace {

void run_stress_in_processes(const test::StressConfig& config) {
  const size_t bytes = test::stress_area_bytes(config);
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(memory != MAP_FAILED);
  test::StressArea area = test::build_stress_area(memory, config);
  std::vector<pid_t> producers;
  for (uint32_t r = 0; r < config.rings; ++r) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      try {
        test::run_producer(real_os(), area, r, config);
        _exit(0);
      } catch (const std::exception& error) {
        std::fprintf(stderr, "producer %u: %s\n", r, error.what());
        _exit(1);
      }
    }
    producers.push_back(pid);
  }
  test::StressResult result = test::run_consumer(real_os(), area, config);
  for (pid_t pid : producers) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  CHECK_MESSAGE(result.bad_records == 0, result.first_error);
  for (uint32_t r = 0; r < config.rings; ++r) {
    CHECK(result.received[r] == config.records_per_ring);
    CHECK(area.sent[r] == config.records_per_ring);  // what the producer says it sent
    CHECK(area.rings[r]->produced() == config.records_per_ring);
    CHECK(area.rings[r]->consumed() == config.records_per_ring);
    CHECK(area.rings[r]->depth() == 0);
  }
  munmap(memory, bytes);
}

}  // namespace

TEST_CASE("three producer processes, rings of 64: every record arrives once, in order") {
  test::StressConfig config;
  config.rings = 3;
  config.capacity = 64;
  config.records_per_ring = 500'000;
  for (uint64_t seed : {1, 2, 3}) {
    CAPTURE(seed);
    config.seed = seed;
    run_stress_in_processes(config);
  }
}

TEST_CASE("rings of 2 records (the smallest): full on nearly every push") {
  test::StressConfig config;
  config.rings = 2;
  config.capacity = 2;
  config.records_per_ring = 30'000;
  config.seed = 3;
  run_stress_in_processes(config);
}

}  // namespace hugepin
