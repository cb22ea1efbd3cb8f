// The arena with real processes: created here, attached by one worker process per rank, reports
// posted and drained, inspected while running (library and `hugepin inspect --json`), a worker
// killed, inspected again (dead), its rank marked dead and taken over, the others detached.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>

#include "base/error.h"
#include "ipc/arena_control.h"
#include "ipc/inspect.h"
#include "ipc/rank_attachment.h"
#include "ipc/test_arena.h"
#include "tests/support/run_command.h"

namespace hugepin {
namespace {

constexpr uint64_t kJobs = 3000;

// Pipes to one worker: it writes a byte when it has posted everything, and exits (detaching) when
// this process closes `stop`.
struct Worker {
  pid_t pid = 0;
  int posted = -1;  // read end
  int stop = -1;    // write end
};

[[noreturn]] void worker_main(const test::TestArena& arena, uint32_t tp_rank, uint32_t pp_rank, int posted, int stop) {
  int code = 1;
  try {
    RankAttachment attachment = test::attach_rank(arena, tp_rank, pp_rank);
    std::memset(attachment.region().data(), static_cast<int>(attachment.rank() + 1), attachment.region().size());
    attachment.set_state(RankState::kReady);
    std::vector<Report> batch;
    for (uint64_t job = 1; job <= kJobs; ++job) {
      batch.push_back(Report{ReportKind::kCopyComplete, 0, 0, 0, job, 0});
      if (batch.size() == 16 || job == kJobs) {
        attachment.post_batch(batch);
        batch.clear();
      }
    }
    attachment.post(ReportKind::kComputeRelease, 1);
    attachment.heartbeat();
    char byte = 1;
    (void)!write(posted, &byte, 1);
    (void)!read(stop, &byte, 1);  // returns 0 when the test closes its end
    attachment.detach();
    code = 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "worker (tp %u, pp %u): %s\n", tp_rank, pp_rank, error.what());
  }
  _exit(code);
}

Worker start_worker(const test::TestArena& arena, uint32_t tp_rank, uint32_t pp_rank, const std::vector<Worker>& earlier) {
  int posted[2];
  int stop[2];
  REQUIRE(pipe(posted) == 0);
  REQUIRE(pipe(stop) == 0);
  std::fflush(nullptr);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(posted[0]);
    close(stop[1]);
    for (const Worker& other : earlier) {  // or the others' pipes never see their end
      close(other.posted);
      close(other.stop);
    }
    worker_main(arena, tp_rank, pp_rank, posted[1], stop[0]);
  }
  close(posted[1]);
  close(stop[0]);
  return Worker{pid, posted[0], stop[1]};
}

// Consumes every ring until `until` holds, checking that each rank's sequences run on from 1 (the
// ring numbers them: a number repeated or skipped across a takeover would show).
struct Drain {
  ArenaControl& scheduler;
  std::map<uint32_t, uint64_t> next_sequence;
  std::map<uint32_t, std::map<ReportKind, uint64_t>> kinds;
  uint64_t bad = 0;

  void once() {
    Report out[64];
    for (uint32_t rank = 0; rank < scheduler.header().rank_count; ++rank) {
      while (size_t n = scheduler.consume(rank, out)) {
        for (size_t i = 0; i < n; ++i) {
          uint64_t& expected = next_sequence.try_emplace(rank, 1).first->second;
          if (out[i].sequence != expected || out[i].rank != rank) ++bad;
          expected = out[i].sequence + 1;
          ++kinds[rank][out[i].kind];
        }
      }
    }
  }
  template <typename Done>
  void until(Done done) {
    while (!done()) {
      scheduler.wait_for_reports(5'000'000'000);
      once();
    }
  }
};

nlohmann::json inspect_cli(const std::string& arena) {
  test::CommandResult run = test::run_hugepin("inspect " + arena + " --json");
  REQUIRE(run.status == 0);
  nlohmann::json json = nlohmann::json::parse(run.out);
  REQUIRE(json["arenas"].size() == 1);
  return json["arenas"][0];
}

}  // namespace

TEST_CASE("workers in their own processes: attach, post, drain, inspect, kill, inspect, take over") {
  test::TestArena arena("integration", test::small_layout(2, 2), ControlOptions{256});
  ArenaControl scheduler = ArenaControl::adopt(real_os(), arena.name());
  std::vector<Worker> workers;
  for (uint32_t rank = 0; rank < 4; ++rank) workers.push_back(start_worker(arena, rank % 2, rank / 2, workers));

  // Drain while they post (rings of 256 hold a tenth of it: the workers wait on backpressure).
  Drain drain{scheduler};
  drain.until([&] {
    for (uint32_t rank = 0; rank < 4; ++rank) {
      if (drain.kinds[rank][ReportKind::kComputeRelease] == 0) return false;
    }
    return true;
  });
  for (Worker& worker : workers) {
    char byte = 0;
    REQUIRE(read(worker.posted, &byte, 1) == 1);
  }
  drain.once();
  CHECK(drain.bad == 0);
  for (uint32_t rank = 0; rank < 4; ++rank) {
    CAPTURE(rank);
    CHECK(drain.kinds[rank][ReportKind::kAttach] == 1);
    CHECK(drain.kinds[rank][ReportKind::kCopyComplete] == kJobs);
    CHECK(drain.kinds[rank][ReportKind::kComputeRelease] == 1);
    CHECK(drain.kinds[rank][ReportKind::kHeartbeat] == 1);
  }
  scheduler.publish(PublishedFigures{2, 0, 1, 0, kJobs, 0, 4 * (kJobs + 3), 0});

  // Inspect while they run: the library...
  ArenaSnapshot snapshot = inspect_arena(real_os(), arena.name());
  REQUIRE(snapshot.ranks.size() == 4);
  for (uint32_t rank = 0; rank < 4; ++rank) {
    CAPTURE(rank);
    CHECK(snapshot.ranks[rank].status.pid == workers[rank].pid);
    CHECK(snapshot.ranks[rank].status.alive);
    CHECK(rank_state_name(snapshot.ranks[rank].status.state) == "ready");
    CHECK(snapshot.ranks[rank].reports_posted == kJobs + 3);
    CHECK(snapshot.ranks[rank].ring_depth == 0);
  }
  CHECK(snapshot.scheduler_alive);
  CHECK(snapshot.scheduler.figures.reports_applied == 4 * (kJobs + 3));
  // ...and the command line, as an operator runs it.
  nlohmann::json json = inspect_cli(arena.name());
  CHECK(json["name"] == arena.name());
  CHECK(json["scheduler"]["pid"] == getpid());
  CHECK(json["scheduler"]["pinned_chunks"] == 2);
  for (uint32_t rank = 0; rank < 4; ++rank) {
    CAPTURE(rank);
    CHECK(json["ranks"][rank]["pid"] == workers[rank].pid);
    CHECK(json["ranks"][rank]["alive"] == true);
    CHECK(json["ranks"][rank]["state"] == "ready");
    CHECK(json["ranks"][rank]["ring"]["posted"] == kJobs + 3);
  }

  // Kill the worker of rank 2 (tp 0, pp 1): the inspector sees it dead.
  REQUIRE(kill(workers[2].pid, SIGKILL) == 0);
  int status = 0;
  REQUIRE(waitpid(workers[2].pid, &status, 0) == workers[2].pid);
  snapshot = inspect_arena(real_os(), arena.name());
  CHECK(snapshot.ranks[2].status.pid == workers[2].pid);
  CHECK_FALSE(snapshot.ranks[2].status.alive);
  CHECK(snapshot.ranks[1].status.alive);
  json = inspect_cli(arena.name());
  CHECK(json["ranks"][2]["alive"] == false);
  CHECK(json["ranks"][2]["pid"] == workers[2].pid);
  test::CommandResult table = test::run_hugepin("inspect " + arena.name());
  CHECK(table.status == 0);
  CHECK(table.out.find("DEAD") != std::string::npos);

  // The scheduler marks it dead; a replacement takes the rank over and continues its sequence.
  CHECK(scheduler.mark_dead_if_gone(2));
  CHECK(inspect_cli(arena.name())["ranks"][2]["state"] == "dead");
  {
    RankAttachment replacement = test::attach_rank(arena, 0, 1);
    CHECK(replacement.took_over());
    CHECK(replacement.region().data()[0] == std::byte{3});  // the data outlived its worker
    json = inspect_cli(arena.name());
    CHECK(json["ranks"][2]["takeovers"] == 1);
    CHECK(json["ranks"][2]["alive"] == true);
    CHECK(json["ranks"][2]["pid"] == getpid());
  }

  // The others leave cleanly.
  for (uint32_t rank : {0u, 1u, 3u}) {
    close(workers[rank].stop);
    REQUIRE(waitpid(workers[rank].pid, &status, 0) == workers[rank].pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  drain.until([&] { return drain.kinds[3][ReportKind::kDetach] == 1 && drain.kinds[0][ReportKind::kDetach] == 1 &&
                           drain.kinds[1][ReportKind::kDetach] == 1 && drain.kinds[2][ReportKind::kDetach] == 1; });
  CHECK(drain.bad == 0);
  CHECK(drain.kinds[2][ReportKind::kAttach] == 2);
  snapshot = inspect_arena(real_os(), arena.name());
  for (uint32_t rank = 0; rank < 4; ++rank) {
    CHECK(rank_state_name(snapshot.ranks[rank].status.state) == "detached");
    CHECK(snapshot.ranks[rank].status.owner == 0);
  }
  for (Worker& worker : workers) close(worker.posted);
}

}  // namespace hugepin
