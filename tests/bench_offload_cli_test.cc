// `hugepin bench offload` on the host backend, as CI can run it: every row of the table is there
// with its figures, and the sample checked after each row verified. No timing is asserted: the
// figures are the benchmark's to report.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>

#include "tests/support/run_command.h"

namespace {

using hugepin::test::run_hugepin;
using Json = nlohmann::json;

Json parse(const std::string& out) {
  // Ranks may warn on stderr (no hugepages here): the JSON is the last object.
  return Json::parse(out.substr(out.find("\n{") == std::string::npos ? out.find('{') : out.find("\n{") + 1));
}

// `hugepin bench offload --backend host --blocks 16K --cpu-bytes 256M <options> --json`, which must
// succeed: its JSON.
Json offload_json(const std::string& options) {
  hugepin::test::CommandResult run =
      run_hugepin("bench offload --backend host --blocks 16K --cpu-bytes 256M " + options + " --json");
  REQUIRE_MESSAGE(run.status == 0, run.out);
  return parse(run.out);
}

TEST_CASE("every mix has its three rows, each with its figures, and the sample verified") {
  const Json result = offload_json("--seconds 0.3");
  CHECK(result["backend"] == "host");
  CHECK(result["sample_verified"] == true);
  CHECK(result["keep_free"].get<double>() == 0.25);  // the default
  CHECK(result["time_every"].get<int>() == 8);        // the default
  CHECK(result["spin"] == false);                     // the default
  CHECK(result["wait_slack_us"].get<double>() == 0);  // the default: the thread's own slack
  CHECK(result["collect_timeout_us"].get<double>() == 1000);
  CHECK(result["chunks_checked"].get<int>() > 0);
  CHECK(result["slots_checked"].get<int>() > 0);
  const Json& rows = result["rows"];
  REQUIRE(rows.size() == 9);
  std::set<std::string> seen;
  for (const Json& row : rows) {
    CAPTURE(row.dump());
    seen.insert(row["mix"].get<std::string>() + "/" + row["path"].get<std::string>());
    CHECK(row["block_bytes"] == 16384);
    CHECK(row["bytes"].get<uint64_t>() > 0);
    CHECK(row["gb_per_second"].get<double>() > 0);
    if (row["path"] == "copy engine") {
      CHECK(row["scheduler_stalls"].is_null());
      continue;
    }
    CHECK(row["jobs"].get<uint64_t>() > 0);
    // Where the slowest SEEN times went: shares in [0, 1], times that the row did spend.
    REQUIRE(row["timed_jobs"].get<uint64_t>() > 0);
    // The host backend's marks read the host's own clock: no calibration, no error bar.
    CHECK(row["clock_window_us"]["p50"].get<double>() == 0);
    CHECK(row["clock_window_us"]["max"].get<double>() == 0);
    CHECK(row["clock_window_us"]["early"].get<uint64_t>() == 0);  // the host's clock on both sides
    REQUIRE(row["clock_window_us"]["rank_p50"].size() == 4);  // TP 2 x PP 2
    for (const auto& window : row["clock_window_us"]["rank_p50"]) CHECK(window.get<double>() == 0);
    const Json& stalls = row["scheduler_stalls"];
    CHECK(stalls["late_seen_busy_share"].get<double>() >= 0);
    CHECK(stalls["late_seen_busy_share"].get<double>() <= 1);
    CHECK(stalls["late_seen_after_timeout_share"].get<double>() >= 0);
    CHECK(stalls["late_seen_after_timeout_share"].get<double>() <= 1);
    REQUIRE(!stalls["late_seen_jobs"].empty());  // at least the slowest timed job
    double previous = 1e300;
    for (const Json& job : stalls["late_seen_jobs"]) {
      CHECK(job["seen_us"].get<double>() >= row["seen_us"]["p99"].get<double>());
      CHECK(job["seen_us"].get<double>() <= previous);  // slowest first
      previous = job["seen_us"].get<double>();
      CHECK(job["outside_collect_us"].get<double>() <= job["seen_us"].get<double>() + 1e-3);
      CHECK(job["collect_call_us"].get<double>() > 0);  // every quorum is seen inside a collect call
    }
    CHECK(stalls["longest_outside_collect_us"].get<double>() > 0);  // it dispatches between collects
    CHECK(stalls["longest_outside_collect_us"].get<double>() < 0.3e6);
    CHECK(stalls["run_queue_wait_us_per_job"].get<double>() >= 0);  // Linux keeps schedstat
    // Waits of 1 ms within the 0.3 s window, one after another at most.
    CHECK(stalls["collect_timeouts"].get<uint64_t>() <= 301);
    CHECK(stalls["steal_share"].get<double>() >= 0);
    CHECK(stalls["steal_share"].get<double>() < 1);
    // How hugepin's sleeps on the report gate ended; the engine way has no gate.
    const Json& gate = stalls["gate_waits"];
    if (row["path"] == "engine way") {
      CHECK(gate.is_null());
    } else {
      REQUIRE(gate.is_object());
      CHECK(gate["waits"].get<uint64_t>() > 0);  // it waited until a job could settle
      for (const char* end : {"timed_out", "woken_late", "no_wake"}) CHECK(gate[end].is_number_unsigned());
    }
    // One job in 8 timed, chosen by id: some, never all (a row settles hundreds of jobs here).
    CHECK(row["timed_jobs"].get<uint64_t>() > 0);
    CHECK(row["timed_jobs"].get<uint64_t>() < row["jobs"].get<uint64_t>());
    CHECK(row["settle_us"]["p99"].get<double>() >= row["settle_us"]["p50"].get<double>());
    CHECK(row["copy_us"]["p50"].get<double>() > 0);
    CHECK(row["overhead_us"]["p50"].is_number());
    CHECK(row["landed_us"]["p99"].is_number());
    CHECK(row["seen_us"]["p99"].is_number());
    CHECK(row["scheduler_cpu_us_per_job"].get<double>() > 0);
    // The loop's CPU holds the protocol's calls and more (the driver, the clock reads).
    CHECK(row["scheduler_loop_cpu_us_per_job"].get<double>() >= row["scheduler_cpu_us_per_job"].get<double>());
    CHECK(row["scheduler_sleeps_per_job"].get<double>() >= 0);
    CHECK(row["ranks_cpu_us_per_job"].get<double>() > 0);  // the ranks copy with memcpy here
    // Jobs were out through the window, never more than --jobs-in-flight (8).
    CHECK(row["mean_jobs_in_flight"].get<double>() > 0);
    CHECK(row["mean_jobs_in_flight"].get<double>() <= 8);
    CHECK(row["no_job_share"].get<double>() >= 0);
    CHECK(row["no_job_share"].get<double>() <= 1);
    // By thread name: each of the 4 ranks' own thread, which copies here, and its report backlog's.
    std::map<std::string, Json> threads;
    for (const Json& group : row["rank_threads"]) threads[group["name"].get<std::string>()] = group;
    REQUIRE(threads.count("hugepin-rank") == 1);
    CHECK(threads["hugepin-rank"]["threads"] == 4);
    CHECK(threads["hugepin-rank"]["cpu_us_per_job"].get<double>() > 0);
    CHECK(threads["hugepin-rank"]["run_queue_wait_us_per_job"].get<double>() >= 0);
    REQUIRE(threads.count("hugepin-backlog") == 1);
    CHECK(threads["hugepin-backlog"]["threads"] == 4);
    CHECK(row["reports_per_second"].get<double>() > 0);
    CHECK(row["chunks_checked"].get<uint64_t>() > 0);
  }
  CHECK(seen.size() == 9);
}

TEST_CASE("looking once per step, evicting only at the floor, every job timed: both protocol rows complete") {
  const Json result =
      offload_json("--seconds 0.3 --mixes store --collect-every-us 500 --keep-free 0 --time-every 1");
  CHECK(result["collect_every_us"].get<double>() == 500);
  CHECK(result["keep_free"].get<double>() == 0);
  CHECK(result["time_every"].get<int>() == 1);
  CHECK(result["sample_verified"] == true);
  const Json& rows = result["rows"];
  REQUIRE(rows.size() == 3);
  for (const Json& row : rows) {
    CAPTURE(row.dump());
    CHECK(row["bytes"].get<uint64_t>() > 0);
    if (row["path"] == "copy engine") continue;
    CHECK(row["jobs"].get<uint64_t>() > 0);
    CHECK(row["timed_jobs"] == row["jobs"]);  // every job in the window timed
    // Looking once per step, no collect call waits: nothing can run out.
    CHECK(row["scheduler_stalls"]["collect_timeouts"].is_null());
    CHECK(row["scheduler_stalls"]["late_seen_after_timeout_share"].is_null());
    CHECK(row["scheduler_stalls"]["late_seen_busy_share"].is_number());
    CHECK(row["mean_jobs_in_flight"].get<double>() > 0);
    CHECK(row["no_job_share"].get<double>() >= 0);
    CHECK(row["scheduler_cpu_us_per_job"].get<double>() > 0);
    CHECK(row["chunks_checked"].get<uint64_t>() > 0);
  }
}

TEST_CASE("a row that timed no job says so: null in JSON, not a zero that reads as measured (ranks spinning)") {
  // --spin: the engine way's ranks look at their copies back to back (hugepin's host engine has no
  // events to ask); the rows complete alike. --wait-slack-us: the scheduler's waits may end late,
  // which changes nothing a row must hold.
  const Json result = offload_json("--seconds 0.1 --mixes store --time-every 1000000 --spin --wait-slack-us 4000");
  CHECK(result["spin"] == true);
  CHECK(result["wait_slack_us"].get<double>() == 4000);
  REQUIRE(result["rows"].size() == 3);
  for (const Json& row : result["rows"]) {
    CAPTURE(row.dump());
    REQUIRE(row["timed_jobs"] == 0);  // copies_timed() picks no id below 400000 at one in a million
    CHECK(row["copy_us"].is_null());
    CHECK(row["overhead_us"].is_null());
    CHECK(row["landed_us"].is_null());
    CHECK(row["seen_us"].is_null());
    CHECK(row["clock_window_us"].is_null());
    if (row["path"] == "copy engine") continue;  // it times nothing, and has no jobs to settle
    CHECK(row["scheduler_stalls"]["late_seen_jobs"].empty());
    CHECK(row["scheduler_stalls"]["late_seen_busy_share"].is_null());
    CHECK(row["settle_us"]["p50"].get<double>() > 0);  // what every job has is still there
  }
}

TEST_CASE("--rank-threads prints each protocol row's rank threads after the table") {
  hugepin::test::CommandResult run = run_hugepin(
      "bench offload --backend host --seconds 0.2 --blocks 16K --cpu-bytes 256M --mixes store --rank-threads");
  REQUIRE_MESSAGE(run.status == 0, run.out);
  CHECK(run.out.find("rank threads by name") != std::string::npos);
  CHECK(run.out.find("the chunk cache keeps 25% of the chunks free") != std::string::npos);
  for (const char* row : {"store hugepin: ", "store engine way: "}) {
    CAPTURE(row);
    const size_t at = run.out.find(row);
    REQUIRE(at != std::string::npos);
    const std::string line = run.out.substr(at, run.out.find('\n', at) - at);
    CHECK(line.find("hugepin-rank x4 ") != std::string::npos);
    CHECK(line.find("hugepin-backlog x4 ") != std::string::npos);
  }
}

TEST_CASE("bad options are refused by name, before anything runs") {
  struct Refusal {
    const char* options;
    const char* message;
  };
  for (const Refusal& refusal : {Refusal{"--blocks 12K", "--blocks 12.00 KiB: a multiple of 8 KiB"},
                                 Refusal{"--mixes mixed,sideways", "unknown mix 'sideways'"},
                                 Refusal{"--collect-every-us 2000000", "--collect-every-us"},
                                 Refusal{"--collect-timeout-us 5", "--collect-timeout-us"},
                                 Refusal{"--wait-slack-us -5", "--wait-slack-us"}}) {
    CAPTURE(refusal.options);
    const hugepin::test::CommandResult refused =
        run_hugepin(std::string("bench offload --backend host ") + refusal.options);
    CHECK(refused.status == 2);
    CHECK(refused.out.find(refusal.message) != std::string::npos);
  }
  hugepin::test::CommandResult run;
  for (const char* share : {"0.7", "-0.1"}) {
    run = run_hugepin(std::string("bench offload --backend host --keep-free ") + share);
    CHECK(run.status == 2);
    const std::string refusal = std::string("--keep-free ") + share + ": a share of the chunks from 0 to 0.5";
    CHECK(run.out.find(refusal) != std::string::npos);
  }
  run = run_hugepin("bench offload --backend host --time-every 0");
  CHECK(run.status == 2);
  CHECK(run.out.find("--time-every: Value 0 not in range 1 to 1000000") != std::string::npos);
  run = run_hugepin("bench offload --backend host --blocks 64K --cpu-bytes 16M --seconds 0.1");
  CHECK(run.status == 1);
  CHECK(run.out.find("at least 128 are needed for 8 jobs of 4 chunks in flight") != std::string::npos);
}

}  // namespace
