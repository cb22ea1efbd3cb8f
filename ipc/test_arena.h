// Arenas for ipc tests: 4 KiB regions in a temporary directory under /dev/shm, a control segment
// /dev/shm/hugepin.<unique name>, and both removed when the test ends, failed or not.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>

#include "base/error.h"
#include "base/size.h"
#include "ipc/arena_control.h"
#include "ipc/rank_attachment.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace hugepin::test {

// "t<pid>-<tag>-<n>": unique across tests and concurrent test processes.
inline std::string unique_arena_name(const std::string& tag) {
  static std::atomic<int> counter{0};
  return cat("t", getpid(), "-", tag, "-", counter++);
}

// tp x pp ranks, `chunks` chunks of one block of `payload` bytes each.
inline ArenaLayout small_layout(uint32_t tp, uint32_t pp, uint64_t chunks = 4, uint64_t payload = 16 * kKiB) {
  ArenaLayout layout;
  layout.tp = tp;
  layout.pp = pp;
  layout.blocks_per_chunk = 1;
  layout.chunk_count = chunks;
  for (uint32_t p = 0; p < pp; ++p) {
    for (uint32_t t = 0; t < tp; ++t) layout.ranks.push_back({t, p, payload + p * 4 * kKiB, chunks * (payload + p * 4 * kKiB), -1});
  }
  return layout;
}

class TestArena {
 public:
  explicit TestArena(const std::string& tag, const ArenaLayout& layout = small_layout(2, 1),
                     const ControlOptions& control = {}, std::optional<gid_t> group = std::nullopt)
      : dir_("/dev/shm"), name_(unique_arena_name(tag)) {
    options_.page_size = 4 * kKiB;
    options_.shm_dir = dir_.path();
    options_.prefault_threads = 1;
    options_.group = group;
    created_ = create_arena_with_control(real_os(), name_, layout, options_, control);
  }
  ~TestArena() {
    try {
      remove_control_segment(real_os(), name_);
    } catch (const std::exception&) {
    }
  }
  TestArena(const TestArena&) = delete;
  TestArena& operator=(const TestArena&) = delete;

  const std::string& name() const { return name_; }
  const ArenaOptions& options() const { return options_; }
  const ArenaCreated& created() const { return created_; }
  const std::string& dir() const { return dir_.path(); }

 private:
  TempDir dir_;
  std::string name_;
  ArenaOptions options_;
  ArenaCreated created_;
};

// Attaches to rank (tp_rank, pp_rank) of `arena`, whose data is in the test's own directory.
inline RankAttachment attach_rank(const TestArena& arena, uint32_t tp_rank, uint32_t pp_rank,
                                  AttachOptions options = {}) {
  options.where = arena.options();
  return RankAttachment::attach(real_os(), arena.name(), tp_rank, pp_rank, options);
}

}  // namespace hugepin::test
