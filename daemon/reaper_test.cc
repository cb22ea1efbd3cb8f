// The reaper's retention destroy in one process, with an Os that fails at a chosen moment: its
// second look, taken under the arena's lock, must fail closed.
#include "daemon/reaper.h"

#include <doctest/doctest.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "base/error.h"
#include "ipc/control_segment.h"
#include "ipc/test_arena.h"
#include "tests/support/fault_os.h"

namespace hugepin::daemon {
namespace {

// Once armed, from the destroy lock on (flock LOCK_EX | LOCK_NB), the control segment at `path`
// cannot be opened: as when hugepind runs out of descriptors right after taking the lock.
class FailAfterLockOs final : public test::ForwardingOs {
 public:
  FailAfterLockOs(Os& target, const std::string& path) : ForwardingOs(target), name_(path.substr(path.rfind('/') + 1)) {}
  int flock(int fd, int operation) override {
    if (armed && operation == (LOCK_EX | LOCK_NB)) failing_ = true;
    return ForwardingOs::flock(fd, operation);
  }
  int openat(int dir_fd, const std::string& name, int flags, mode_t mode) override {
    if (failing_ && name == name_) return -EMFILE;
    return ForwardingOs::openat(dir_fd, name, flags, mode);
  }
  void disarm() {
    armed = false;
    failing_ = false;
  }
  bool armed = false;

 private:
  std::string name_;  // the segment's file name in /dev/shm
  bool failing_ = false;
};

bool has_event(const ReapReport& report, const std::string& text) {
  return std::any_of(report.events.begin(), report.events.end(),
                     [&](const std::string& event) { return event.find(text) != std::string::npos; });
}

}  // namespace

TEST_CASE("retention's second look under the arena's lock fails closed: an arena it cannot read stays") {
  test::TestArena arena("reap");
  const std::string segment = control_segment_path(arena.name());
  FailAfterLockOs os(real_os(), segment);
  Reaper reaper(os, getpid());  // the test created the arena: as hugepind, not an owner
  ReaperOptions options;
  options.where = arena.options();
  options.prefix = arena.name();
  options.retention_ns = 1;
  reaper.set_options(options);
  ReapReport first = reaper.pass(1'000, {});  // first seen without owner
  CHECK(first.expired == 0);

  os.armed = true;
  ReapReport declined = reaper.pass(2'000'000'000, {});
  CHECK(declined.expired == 0);
  CHECK(access(segment.c_str(), F_OK) == 0);
  CHECK(has_event(declined, "changed or could not be read again under its lock: left for the next pass"));

  os.disarm();
  ReapReport expired = reaper.pass(3'000'000'000, {});
  CHECK(expired.expired == 1);
  CHECK(access(segment.c_str(), F_OK) != 0);
}

}  // namespace hugepin::daemon
