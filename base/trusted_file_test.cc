// open_trusted against what another user plants: links, FIFOs, devices, foreign and
// world-writable files, links to directories on the way. Planted files belong to uid 65534
// (nobody), as another local user's would.
#include "base/trusted_file.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "tests/support/error_text.h"
#include "tests/support/temp_dir.h"

namespace hugepin {
namespace {

using test::contains;
using test::error_of;

constexpr uid_t kNobody = 65534;
constexpr FileRule kRegion{FileType::kRegular, FileOwners::kTrusted, "region file"};

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string refusal(const TrustedPath& path, int flags = O_RDONLY, const FileRule& rule = kRegion) {
  return error_of([&] { open_trusted(real_os(), path, flags, rule); });
}

}  // namespace

TEST_CASE("a planted link is refused, never followed: as the file, and as a directory on the way") {
  test::TempDir dir;
  const std::string target = dir.path() + "/root-only";
  write_text(target, "root's data");
  REQUIRE(chmod(target.c_str(), 0600) == 0);
  REQUIRE(mkdir((dir.path() + "/a1").c_str(), 0700) == 0);
  REQUIRE(symlink(target.c_str(), (dir.path() + "/a1/rank-0").c_str()) == 0);
  REQUIRE(lchown((dir.path() + "/a1/rank-0").c_str(), kNobody, kNobody) == 0);
  const std::string why = refusal({dir.path(), "a1/rank-0"}, O_RDWR);
  CHECK(why == cat("refusing region file ", dir.path(), "/a1/rank-0: it is a symbolic link, not a regular file"));
  std::ifstream in(target);
  std::string kept;
  std::getline(in, kept);
  CHECK(kept == "root's data");

  // A link to a directory holding a root file of the right name.
  REQUIRE(mkdir((dir.path() + "/real").c_str(), 0700) == 0);
  write_text(dir.path() + "/real/rank-0", "x");
  REQUIRE(symlink((dir.path() + "/real").c_str(), (dir.path() + "/a2").c_str()) == 0);
  CHECK(contains(refusal({dir.path(), "a2/rank-0"}), cat(dir.path(), "/a2 is a symbolic link, not a directory")));
  // The same file reached without the link is fine, and the error says which component was wrong.
  CHECK(open_trusted(real_os(), {dir.path(), "real/rank-0"}, O_RDONLY, kRegion).fd);
  try {
    open_trusted(real_os(), {dir.path(), "a2/rank-0"}, O_RDONLY, kRegion);
    FAIL("followed a link");
  } catch (const Error& error) {
    CHECK(error.errno_value() == kRefusedErrno);
  }
}

TEST_CASE("a FIFO, a socket or a device is refused without being opened: nothing blocks") {
  test::TempDir dir;
  REQUIRE(mkfifo((dir.path() + "/fifo").c_str(), 0600) == 0);
  // O_RDONLY on a FIFO would wait for a writer for ever; the O_PATH look refuses it first.
  CHECK(refusal({dir.path(), "fifo"}) ==
        cat("refusing region file ", dir.path(), "/fifo: it is a FIFO, not a regular file"));
  CHECK(refusal({dir.path(), "fifo"}, O_RDWR | O_CREAT) ==
        cat("refusing region file ", dir.path(), "/fifo: it is a FIFO, not a regular file"));
  CHECK(contains(refusal(user_named("/dev/zero")), "it is a character device, not a regular file"));
  CHECK(contains(error_of([&] { read_trusted_file(real_os(), user_named("/dev/zero"), kRegion, 1024); }),
                 "refusing region file /dev/zero: it is a character device"));
}

TEST_CASE("another user's file, or one every user may write, is refused where hugepin would trust it") {
  test::TempDir dir;
  const std::string theirs = dir.path() + "/theirs";
  write_text(theirs, "x");
  REQUIRE(chown(theirs.c_str(), kNobody, kNobody) == 0);
  REQUIRE(chmod(theirs.c_str(), 0644) == 0);
  CHECK(contains(refusal({dir.path(), "theirs"}), "it belongs to uid 65534 (mode 0644), not to root"));
  // A listing may show it.
  CHECK(open_trusted(real_os(), {dir.path(), "theirs"}, O_PATH, {FileType::kRegular, FileOwners::kAny, "file"}).fd);
  // Shared with a group of this process (group read and write): what a group-shared arena is.
  REQUIRE(chown(theirs.c_str(), kNobody, getegid()) == 0);
  REQUIRE(chmod(theirs.c_str(), 0660) == 0);
  CHECK(open_trusted(real_os(), {dir.path(), "theirs"}, O_RDWR, kRegion).fd);

  const std::string open_to_all = dir.path() + "/open";
  write_text(open_to_all, "x");
  REQUIRE(chmod(open_to_all.c_str(), 0666) == 0);
  CHECK(contains(refusal({dir.path(), "open"}, O_RDONLY, {FileType::kRegular, FileOwners::kAny, "file"}),
                 "it is writable by every user (mode 0666)"));

  // Directories on the way: another user's is refused, one all may write must be sticky.
  REQUIRE(mkdir((dir.path() + "/d").c_str(), 0755) == 0);
  write_text(dir.path() + "/d/f", "x");
  REQUIRE(chown((dir.path() + "/d").c_str(), kNobody, kNobody) == 0);
  CHECK(contains(refusal({dir.path(), "d/f"}), cat(dir.path(), "/d belongs to uid 65534")));
  REQUIRE(chown((dir.path() + "/d").c_str(), 0, 0) == 0);
  REQUIRE(chmod((dir.path() + "/d").c_str(), 0777) == 0);
  CHECK(contains(refusal({dir.path(), "d/f"}), cat(dir.path(), "/d is writable by every user (mode 0777) and not sticky")));
  REQUIRE(chmod((dir.path() + "/d").c_str(), 01777) == 0);
  CHECK(open_trusted(real_os(), {dir.path(), "d/f"}, O_RDONLY, kRegion).fd);
  // A base others may write must be sticky too: they could swap what is below it.
  REQUIRE(chmod((dir.path() + "/d").c_str(), 0777) == 0);
  CHECK(contains(refusal({dir.path() + "/d", "f"}), "/d is writable by every user (mode 0777) and not sticky"));
}

TEST_CASE("a file made or opened is what it should be: regular, blocking again, not a path escaping its base") {
  test::TempDir dir;
  TrustedFile made = open_trusted(real_os(), {dir.path(), "new"}, O_RDWR | O_CREAT | O_EXCL, kRegion, 0600);
  CHECK(S_ISREG(made.status.st_mode));
  CHECK((fcntl(made.fd.get(), F_GETFL) & O_NONBLOCK) == 0);  // io_uring would see a non-blocking file
  CHECK(contains(error_of([&] { open_trusted(real_os(), {dir.path(), "new"}, O_RDWR | O_CREAT | O_EXCL, kRegion); }),
                 "File exists"));
  CHECK(contains(refusal({dir.path(), "../etc/passwd"}), "'..' is not a file name"));
  try {
    open_trusted(real_os(), {dir.path(), "missing"}, O_RDONLY, kRegion);
    FAIL("opened a missing file");
  } catch (const Error& error) {
    CHECK(error.errno_value() == ENOENT);
    CHECK(contains(error.what(), cat("cannot open region file ", dir.path(), "/missing")));
  }
  TrustedFile sub = make_trusted_dir(real_os(), {dir.path(), "sub"}, 0700, {FileType::kDirectory, FileOwners::kTrusted, "dir"});
  CHECK(S_ISDIR(sub.status.st_mode));
  CHECK(make_trusted_dir(real_os(), {dir.path(), "sub"}, 0700, {FileType::kDirectory, FileOwners::kTrusted, "dir"}).fd);
}

TEST_CASE("a configuration larger than its limit is refused, not read whole") {
  test::TempDir dir;
  write_text(dir.path() + "/big", std::string(5000, 'x'));
  CHECK(read_trusted_file(real_os(), {dir.path(), "big"}, kRegion, 5000).size() == 5000);
  CHECK(contains(error_of([&] { read_trusted_file(real_os(), {dir.path(), "big"}, kRegion, 4999); }),
                 cat("region file ", dir.path(), "/big is more than 4999 bytes")));
  CHECK(user_named("plan.json").base == ".");
  CHECK(user_named("/etc/hugepin/hugepind.conf").full() == "/etc/hugepin/hugepind.conf");
  CHECK(user_named("/x").base == "/");
}

}  // namespace hugepin
