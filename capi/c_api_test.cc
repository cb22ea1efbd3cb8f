// The C ABI as a C caller sees it: every bad input returns a negative code with a message naming
// it, and changes nothing (the arena stays as it was, no report is posted, no job opens).
#include "hugepin/hugepin.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "capi/c_api_worker_options.h"

namespace {

constexpr const char* kPlan = R"({"tp": 2, "pp": 1, "blocks_per_chunk": 2, "cpu_bytes": 32768, "page_size": "4K",
  "ranks": [{"tp_rank": 0, "pp_rank": 0, "num_blocks": 16, "bytes_per_block": 512},
            {"tp_rank": 1, "pp_rank": 0, "num_blocks": 16, "bytes_per_block": 512}]})";

std::string arena_name(const char* tag) { return "capi-" + std::to_string(getpid()) + "-" + tag; }

bool says(const char* part) { return std::strstr(hugepin_last_error(), part) != nullptr; }

hugepin_plan* make_plan(const char* json = kPlan) {
  hugepin_plan* plan = nullptr;
  REQUIRE(hugepin_plan_from_json(json, std::strlen(json), &plan) == 0);
  return plan;
}

struct Arena {
  explicit Arena(const char* tag) : name(arena_name(tag)) {
    hugepin_plan* plan = make_plan();
    REQUIRE(hugepin_scheduler_create(name.c_str(), plan, nullptr, nullptr, &scheduler) == 0);
    hugepin_plan_free(plan);
  }
  ~Arena() { hugepin_scheduler_close(scheduler); }
  std::string name;
  hugepin_scheduler* scheduler = nullptr;
};

TEST_CASE("version and last error") {
  CHECK(hugepin_version() == HUGEPIN_VERSION);
  CHECK(std::string(hugepin_version_string()) == "0.3.0");
  CHECK(hugepin_last_error() != nullptr);
}

TEST_CASE("plans: malformed JSON, invalid values and null arguments are refused by name") {
  hugepin_plan* plan = reinterpret_cast<hugepin_plan*>(0x1);  // must stay untouched on failure
  const char* broken = "{\"tp\": 2,";
  CHECK(hugepin_plan_from_json(broken, std::strlen(broken), &plan) == -EINVAL);
  CHECK(plan == reinterpret_cast<hugepin_plan*>(0x1));
  CHECK(std::strlen(hugepin_last_error()) > 0);
  const char* zero_tp = R"({"tp": 0, "pp": 1, "blocks_per_chunk": 1, "cpu_bytes": 1, "ranks": []})";
  CHECK(hugepin_plan_from_json(zero_tp, std::strlen(zero_tp), &plan) == -EINVAL);
  CHECK(says("tp"));
  CHECK(hugepin_plan_from_json(nullptr, 0, &plan) == -EINVAL);
  CHECK(says("json is NULL"));
  CHECK(hugepin_plan_from_json(kPlan, std::strlen(kPlan), nullptr) == -EINVAL);
  CHECK(says("out is NULL"));
  hugepin_plan_info info;
  CHECK(hugepin_plan_get_info(nullptr, &info) == -EINVAL);
  hugepin_plan_free(nullptr);

  plan = make_plan();
  REQUIRE(hugepin_plan_get_info(plan, &info) == 0);
  CHECK(info.tp == 2);
  CHECK(info.chunk_count == 32768 / (2 * 1024));
  size_t length = 0;
  CHECK(hugepin_plan_to_json(plan, nullptr, 0, &length) == -ENOSPC);
  CHECK(length > 10);
  std::vector<char> text(length + 1);
  CHECK(hugepin_plan_to_json(plan, text.data(), text.size(), &length) == 0);
  CHECK(std::string(text.data()).find("\"chunk_count\"") != std::string::npos);
  hugepin_plan_free(plan);
}

TEST_CASE("arenas: unknown names, bad names and existing names") {
  hugepin_arena_info info;
  CHECK(hugepin_arena_get_info("capi-no-such-arena", &info) == -ENOENT);
  CHECK(says("capi-no-such-arena"));
  CHECK(hugepin_arena_get_info("../etc", &info) == -EINVAL);
  CHECK(hugepin_arena_destroy("capi-no-such-arena") < 0);
  CHECK(hugepin_arena_get_info(nullptr, &info) == -EINVAL);

  Arena arena("exists");
  hugepin_plan* plan = make_plan();
  CHECK(hugepin_arena_create(arena.name.c_str(), plan, nullptr) == -EEXIST);
  hugepin_scheduler* second = nullptr;
  CHECK(hugepin_scheduler_create(arena.name.c_str(), plan, nullptr, nullptr, &second) == -EEXIST);
  CHECK(second == nullptr);
  CHECK(hugepin_scheduler_adopt(arena.name.c_str(), nullptr, &second) == -EBUSY);
  CHECK(says("scheduler role"));
  hugepin_arena_options bad_options = HUGEPIN_ARENA_OPTIONS_INIT;
  bad_options.struct_size = 2;
  CHECK(hugepin_arena_create(arena_name("bad-options").c_str(), plan, &bad_options) == -EINVAL);
  CHECK(says("struct_size = 2"));
  CHECK(hugepin_arena_get_info(arena_name("bad-options").c_str(), &info) == -ENOENT);
  hugepin_plan_free(plan);

  REQUIRE(hugepin_arena_get_info(arena.name.c_str(), &info) == 0);
  CHECK(info.ranks == 2);
  CHECK(info.creator_pid == getpid());
}

TEST_CASE("worker options: how a worker waits for its copies, as the session is asked") {
  hugepin_worker_options given = HUGEPIN_WORKER_OPTIONS_INIT;
  hugepin::WorkerSessionOptions asked = hugepin::capi::worker_session_options(given);
  CHECK(asked.engine.completion_poll_ns == 0);  // the default: asleep
  CHECK_FALSE(asked.engine.completion_spin);
  given.completion_poll_ns = 25'000;
  asked = hugepin::capi::worker_session_options(given);
  CHECK(asked.engine.completion_poll_ns == 25'000);
  CHECK_FALSE(asked.engine.completion_spin);
  given.completion_poll_ns = HUGEPIN_COMPLETION_SPIN;
  asked = hugepin::capi::worker_session_options(given);
  CHECK(asked.engine.completion_spin);
  CHECK(asked.engine.completion_poll_ns == 0);
  given.completion_poll_ns = -2;
  CHECK_THROWS_WITH_AS(hugepin::capi::worker_session_options(given),
                       doctest::Contains("completion_poll_ns = -2: must be 0 (wait asleep)"), hugepin::Error);
}

TEST_CASE("workers: null handles, unknown arenas, ranks and pairs out of range") {
  Arena arena("worker");
  hugepin_worker* worker = nullptr;
  CHECK(hugepin_worker_attach("capi-no-such-arena", 0, 0, nullptr, &worker) == -ENOENT);
  CHECK(hugepin_worker_attach(arena.name.c_str(), 2, 0, nullptr, &worker) == -ERANGE);
  CHECK(says("outside arena"));
  CHECK(hugepin_worker_attach(arena.name.c_str(), 0, 1, nullptr, &worker) == -ERANGE);
  hugepin_worker_options polling = HUGEPIN_WORKER_OPTIONS_INIT;
  polling.completion_poll_ns = -2;
  CHECK(hugepin_worker_attach(arena.name.c_str(), 0, 0, &polling, &worker) == -EINVAL);
  CHECK(says("completion_poll_ns = -2"));
  CHECK(says("HUGEPIN_COMPLETION_SPIN"));
  CHECK(worker == nullptr);
  polling.completion_poll_ns = HUGEPIN_COMPLETION_SPIN;  // taken: the GPU engine spins (none here)
  REQUIRE(hugepin_worker_attach(arena.name.c_str(), 0, 0, &polling, &worker) == 0);
  CHECK(hugepin_worker_detach(worker) == 0);
  worker = nullptr;
  CHECK(hugepin_worker_pin(nullptr, 0) == -EINVAL);
  CHECK(says("worker is NULL"));
  CHECK(hugepin_worker_store(nullptr, 1, nullptr, 0, nullptr) == -EINVAL);
  CHECK(hugepin_worker_detach(nullptr) == 0);

  // A caller compiled before completion_poll_ns existed: the library reads only what it set.
  hugepin_worker_options older = HUGEPIN_WORKER_OPTIONS_INIT;
  older.completion_poll_ns = -2;  // beyond the older size: never read (it would be refused)
  older.struct_size = offsetof(hugepin_worker_options, completion_poll_ns);
  REQUIRE(hugepin_worker_attach(arena.name.c_str(), 0, 0, &older, &worker) == 0);
  hugepin_worker* twice = nullptr;
  CHECK(hugepin_worker_attach(arena.name.c_str(), 0, 0, nullptr, &twice) == -EBUSY);
  hugepin_region_info region;
  REQUIRE(hugepin_worker_get_region(worker, &region) == 0);
  CHECK(region.segments == 1);
  CHECK(region.pinned == 0);
  CHECK(region.page_size == 4096);
  hugepin_segment_info segment;
  CHECK(hugepin_worker_get_segment(worker, 1, &segment) == -ERANGE);
  REQUIRE(hugepin_worker_get_segment(worker, 0, &segment) == 0);
  CHECK(segment.bytes_per_block == 512);

  const hugepin_block_pair pair{0, 0};
  CHECK(hugepin_worker_store(worker, 1, &pair, 1, nullptr) == -EINVAL);
  CHECK(says("no device KV yet"));
  std::vector<char> device(16 * 512);
  hugepin_device_segment kv{reinterpret_cast<uintptr_t>(device.data()), 512, 16, 512};
  CHECK(hugepin_worker_set_device_kv(worker, &kv, 1, static_cast<hugepin_backend>(7)) == -EINVAL);
  CHECK(hugepin_worker_set_device_kv(worker, &kv, 2, HUGEPIN_BACKEND_HOST) == -EINVAL);
  hugepin_device_segment wrong = kv;
  wrong.bytes_per_block = 256;
  CHECK(hugepin_worker_set_device_kv(worker, &wrong, 1, HUGEPIN_BACKEND_HOST) == -EINVAL);
  CHECK(says("bytes_per_block = 256"));
  REQUIRE(hugepin_worker_set_device_kv(worker, &kv, 1, HUGEPIN_BACKEND_HOST) == 0);

  const hugepin_block_pair beyond[] = {{0, 0}, {16, 1}};  // device block 16 of 16
  CHECK(hugepin_worker_store(worker, 1, beyond, 2, nullptr) == -ERANGE);
  CHECK(hugepin_worker_store(worker, 1, nullptr, 2, nullptr) == -EINVAL);
  size_t count = 99;
  hugepin_job_result results[4];
  CHECK(hugepin_worker_finished(worker, results, 4, &count) == 0);
  CHECK(count == 0);  // nothing was copied or reported
  CHECK(hugepin_worker_wait(worker, 1, 0) == -ENOENT);

  REQUIRE(hugepin_worker_store(worker, 1, &pair, 1, nullptr) == 0);
  CHECK(hugepin_worker_wait(worker, 1, 0) == 0);
  CHECK(hugepin_worker_finished(worker, results, 4, &count) == 0);
  REQUIRE(count == 1);
  CHECK(results[0].job == 1);
  CHECK(results[0].error == 0);
  CHECK(results[0].bytes == 512);
  CHECK(hugepin_worker_release(worker, 0, nullptr) == -EINVAL);
  CHECK(hugepin_worker_detach(worker) == 0);
}

// The jobs a worker stores (host backend), their results in `results` (time_copies on).
std::vector<hugepin_job_result> timed_run(const Arena& arena, const hugepin_worker_options& options, int jobs) {
  hugepin_worker* worker = nullptr;
  REQUIRE(hugepin_worker_attach(arena.name.c_str(), 0, 0, &options, &worker) == 0);
  std::vector<char> device(16 * 512);
  hugepin_device_segment kv{reinterpret_cast<uintptr_t>(device.data()), 512, 16, 512};
  REQUIRE(hugepin_worker_set_device_kv(worker, &kv, 1, HUGEPIN_BACKEND_HOST) == 0);
  const hugepin_block_pair pair{0, 0};
  for (int job = 1; job <= jobs; ++job) REQUIRE(hugepin_worker_store(worker, job, &pair, 1, nullptr) == 0);
  std::vector<hugepin_job_result> results(jobs);
  size_t count = 0;
  REQUIRE(hugepin_worker_finished(worker, results.data(), results.size(), &count) == 0);
  REQUIRE(count == static_cast<size_t>(jobs));
  CHECK(hugepin_worker_detach(worker) == 0);
  return results;
}

TEST_CASE("workers: time_copies_every times a sample of the jobs; a caller compiled before it, every job") {
  Arena arena("timed");
  hugepin_worker_options options = HUGEPIN_WORKER_OPTIONS_INIT;
  options.time_copies = 1;
  options.time_copies_every = 1000000;  // the library picks no job id below 400000 at this rate
  for (const hugepin_job_result& result : timed_run(arena, options, 8)) {
    CAPTURE(result.job);
    CHECK(result.gpu_done_ns == 0);
    CHECK(result.copy_ns == 0);
  }
  options.time_copies_every = 0;  // every job
  for (const hugepin_job_result& result : timed_run(arena, options, 8)) CHECK(result.gpu_done_ns > 0);
  options.time_copies_every = 1000000;  // beyond the older size: never read
  options.struct_size = offsetof(hugepin_worker_options, time_copies_every);
  for (const hugepin_job_result& result : timed_run(arena, options, 8)) CHECK(result.gpu_done_ns > 0);
}

TEST_CASE("workers: a job posted done without a copy settles at the scheduler, completed or failed") {
  Arena arena("post-done");
  hugepin_worker* workers[2] = {nullptr, nullptr};
  REQUIRE(hugepin_worker_attach(arena.name.c_str(), 0, 0, nullptr, &workers[0]) == 0);
  REQUIRE(hugepin_worker_attach(arena.name.c_str(), 1, 0, nullptr, &workers[1]) == 0);
  REQUIRE(hugepin_scheduler_drain(arena.scheduler, 0, nullptr) == 0);
  const hugepin_chunk_id two[] = {1, 2};
  const hugepin_chunk_id three = 3;
  hugepin_job_id completes = 0;
  hugepin_job_id fails = 0;
  REQUIRE(hugepin_scheduler_dispatch(arena.scheduler, HUGEPIN_STORE, two, 2, &completes) == 0);
  REQUIRE(hugepin_scheduler_dispatch(arena.scheduler, HUGEPIN_STORE, &three, 1, &fails) == 0);

  CHECK(hugepin_worker_post_done(workers[0], 0, 0) == -EINVAL);
  CHECK(says("job id 0"));
  CHECK(hugepin_worker_post_done(workers[0], completes, -5) == -EINVAL);
  CHECK(says("error = -5"));
  CHECK(hugepin_worker_post_done(nullptr, completes, 0) == -EINVAL);
  size_t count = 0;
  REQUIRE(hugepin_scheduler_drain(arena.scheduler, 0, &count) == 0);
  CHECK(count == 0);  // the refusals posted nothing

  REQUIRE(hugepin_worker_post_done(workers[0], completes, 0) == 0);
  REQUIRE(hugepin_worker_post_done(workers[1], completes, 0) == 0);
  REQUIRE(hugepin_worker_post_done(workers[0], fails, 0) == 0);
  REQUIRE(hugepin_worker_post_done(workers[1], fails, EIO) == 0);
  REQUIRE(hugepin_scheduler_drain(arena.scheduler, 0, &count) == 0);
  CHECK(count == 4);
  hugepin_job_id done[4];
  REQUIRE(hugepin_scheduler_completed(arena.scheduler, done, 4, &count) == 0);
  REQUIRE(count == 1);
  CHECK(done[0] == completes);
  hugepin_failed_job failed[4];
  REQUIRE(hugepin_scheduler_failed(arena.scheduler, failed, 4, &count) == 0);
  REQUIRE(count == 1);
  CHECK(failed[0].job == fails);
  CHECK(failed[0].rank == 1);
  CHECK(failed[0].cause == 0);
  CHECK(failed[0].error == EIO);
  hugepin_scheduler_figures figures;
  REQUIRE(hugepin_scheduler_get_figures(arena.scheduler, &figures) == 0);
  CHECK(figures.pinned_chunks == 0);  // both ranks settled both jobs: no copy holds a chunk
  CHECK(hugepin_worker_detach(workers[0]) == 0);
  CHECK(hugepin_worker_detach(workers[1]) == 0);
}

TEST_CASE("schedulers: chunks out of range, empty jobs, bad kinds and retired chunks change nothing") {
  Arena arena("scheduler");
  hugepin_scheduler* s = arena.scheduler;
  hugepin_arena_info info;
  REQUIRE(hugepin_scheduler_get_info(s, &info) == 0);
  hugepin_job_id job = 0;
  const hugepin_chunk_id beyond = info.chunk_count;
  CHECK(hugepin_scheduler_dispatch(s, HUGEPIN_STORE, &beyond, 1, &job) == -ERANGE);
  CHECK(says("out of range"));
  CHECK(hugepin_scheduler_dispatch(s, HUGEPIN_STORE, nullptr, 0, &job) == -EINVAL);
  const hugepin_chunk_id zero = 0;
  CHECK(hugepin_scheduler_dispatch(s, static_cast<hugepin_job_kind>(9), &zero, 1, &job) == -EINVAL);
  CHECK(hugepin_scheduler_dispatch(s, HUGEPIN_STORE, &zero, 1, nullptr) == -EINVAL);
  CHECK(hugepin_scheduler_dispatch(nullptr, HUGEPIN_STORE, &zero, 1, &job) == -EINVAL);
  CHECK(hugepin_scheduler_retire(s, beyond) == -ERANGE);
  REQUIRE(hugepin_scheduler_retire(s, 0) == 0);
  CHECK(hugepin_scheduler_retire(s, 0) == -EINVAL);
  CHECK(hugepin_scheduler_dispatch(s, HUGEPIN_LOAD, &zero, 1, &job) == -EBUSY);
  CHECK(job == 0);
  hugepin_scheduler_figures figures;
  REQUIRE(hugepin_scheduler_get_figures(s, &figures) == 0);
  CHECK(figures.jobs_dispatched == 0);
  CHECK(figures.pinned_chunks == 0);

  hugepin_scheduler_options bad = HUGEPIN_SCHEDULER_OPTIONS_INIT;
  bad.heartbeat_timeout_ns = -1;
  hugepin_scheduler* other = nullptr;
  hugepin_plan* plan = make_plan();
  CHECK(hugepin_scheduler_create(arena_name("bad").c_str(), plan, nullptr, &bad, &other) == -EINVAL);
  CHECK(says("heartbeat_timeout_ns = -1"));
  CHECK(hugepin_arena_get_info(arena_name("bad").c_str(), &info) == -ENOENT);
  hugepin_plan_free(plan);

  size_t count = 1;
  CHECK(hugepin_scheduler_completed(s, nullptr, 4, &count) == -EINVAL);
  CHECK(hugepin_scheduler_completed(s, nullptr, 0, &count) == 0);
  CHECK(count == 0);
  CHECK(hugepin_scheduler_drain(s, 0, nullptr) == 0);
  CHECK(hugepin_scheduler_close(nullptr) == 0);
}

TEST_CASE("closing the scheduler that created an arena destroys it; keep_arena keeps it for adoption") {
  const std::string name = arena_name("keep");
  hugepin_plan* plan = make_plan();
  hugepin_scheduler_options keep = HUGEPIN_SCHEDULER_OPTIONS_INIT;
  keep.keep_arena = 1;
  hugepin_scheduler* s = nullptr;
  REQUIRE(hugepin_scheduler_create(name.c_str(), plan, nullptr, &keep, &s) == 0);
  REQUIRE(hugepin_scheduler_close(s) == 0);
  hugepin_arena_info info;
  CHECK(hugepin_arena_get_info(name.c_str(), &info) == 0);
  REQUIRE(hugepin_scheduler_adopt(name.c_str(), nullptr, &s) == 0);
  REQUIRE(hugepin_scheduler_close(s) == 0);  // adopted, not created: the arena stays
  CHECK(hugepin_arena_get_info(name.c_str(), &info) == 0);
  REQUIRE(hugepin_arena_destroy(name.c_str()) == 0);
  CHECK(hugepin_arena_get_info(name.c_str(), &info) == -ENOENT);
  hugepin_plan_free(plan);
}

}  // namespace
