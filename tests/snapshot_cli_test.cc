// hugepin arena save|load as users run them: exit statuses, one-line errors naming the value,
// JSON that parses, and a save killed with SIGKILL mid-way leaving a loadable snapshot.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using hugepin::test::run_command;
using hugepin::test::run_hugepin;
using Run = hugepin::test::CommandResult;

// An arena made with the CLI on 4 KiB shared memory (no hugepages taken), destroyed at the end.
struct CliArena {
  std::string name = "hp-spill-cli-" + std::to_string(getpid());
  explicit CliArena(const std::string& size) {
    Run run = run_hugepin("arena create " + name + " --size " + size + " --ranks 2 --pagesize 4K");
    REQUIRE(run.status == 0);
  }
  ~CliArena() { run_hugepin("arena destroy " + name); }
};

int lines(const std::string& text) { return static_cast<int>(std::count(text.begin(), text.end(), '\n')); }

}  // namespace

TEST_CASE("arena save and load: a round trip, JSON, and refusals with one line") {
  CliArena arena("64M");
  hugepin::test::TempDir disk("/var/tmp");
  const std::string dir = disk.path() + "/snap";
  Run saved = run_hugepin("arena save " + arena.name + " " + dir + " --chunk 1M");
  CHECK(saved.status == 0);
  CHECK(saved.out.find("saved arena '" + arena.name + "' to " + dir + " (generation 1): 2 regions, 64.00 MiB in 64 chunks") == 0);

  Run json = run_hugepin("arena save " + arena.name + " " + dir + " --chunk 1M --io threads --json");
  REQUIRE(json.status == 0);
  auto parsed = nlohmann::json::parse(json.out);
  CHECK(parsed["generation"] == 2);
  CHECK(parsed["bytes"] == 64 * 1024 * 1024);
  CHECK(parsed["backend"].get<std::string>().find("pread/pwrite") == 0);

  Run loaded = run_hugepin("arena load " + arena.name + " " + dir);
  CHECK(loaded.status == 0);
  CHECK(loaded.out.find("loaded arena '" + arena.name + "' from " + dir + " (generation 2)") == 0);

  Run chunk = run_hugepin("arena load " + arena.name + " " + dir + " --chunk 2M");
  CHECK(chunk.status == 1);
  CHECK(chunk.out.find("field 'chunk_bytes' of rank 0 is 1048576 in the snapshot, 2097152 asked") != std::string::npos);
  CHECK(lines(chunk.out) == 1);

  Run missing = run_hugepin("arena load " + arena.name + " " + disk.path());
  CHECK(missing.status == 1);
  CHECK(missing.out == "hugepin: error: " + disk.path() + " holds no snapshot (no manifest.json)\n");

  CHECK(run_hugepin("arena save " + arena.name + " " + dir + " --chunk 12Q").status == 2);
  CHECK(run_hugepin("arena save " + arena.name + " " + dir + " --io fast").status == 2);
  CHECK(run_hugepin("arena save " + arena.name).status == 2);  // DIR missing
  CHECK(run_hugepin("arena save no-such-arena-here " + dir).status == 1);
}

TEST_CASE("a save killed with SIGKILL mid-way leaves a snapshot that loads; the next save cleans up") {
  CliArena arena("512M");
  hugepin::test::TempDir disk("/var/tmp");
  const std::string dir = disk.path() + "/snap";
  REQUIRE(run_hugepin("arena save " + arena.name + " " + dir).status == 0);
  for (const char* delay : {"0.05", "0.2", "0.5"}) {
    CAPTURE(delay);
    Run killed = run_command("{ " + std::string(HUGEPIN_CLI_PATH) + " arena save " + arena.name + " " + dir +
                             " & pid=$!; sleep " + delay + "; kill -9 $pid; wait $pid; echo status=$?; } 2>/dev/null");
    CHECK(killed.out.find("status=") != std::string::npos);
    CHECK(run_hugepin("arena load " + arena.name + " " + dir).status == 0);
  }
  Run saved = run_hugepin("arena save " + arena.name + " " + dir + " --json");
  REQUIRE(saved.status == 0);
  const auto generation = nlohmann::json::parse(saved.out)["generation"].get<uint64_t>();
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{".lock", "data-" + std::to_string(generation), "manifest.json"});
}
