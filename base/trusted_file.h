// Opening a file that another local user could have placed: the one place that decides whether
// hugepin may use it (DESIGN.md, "Planted paths").
//
// Segments, region files, shim tables, quarantine, configuration, plan and spill files live in
// directories others can write (/dev/shm is 1777) or are named by users. A planted symbolic link
// would make a root process write where the planter chose; a FIFO would block open(2) and read(2)
// forever; a file another user owns or can rewrite would feed or read the process's data. So a
// path is opened in two parts:
//
//   base    a directory the operator chose (a mount, /dev/shm, --dir): opened as given, links
//           and all; it must be a directory, and one others can write must be sticky (as /tmp)
//   below   what is under it, which others may have made: each component opened on its own with
//           O_NOFOLLOW (a link anywhere is refused, never followed) and checked with fstat before
//           the next is opened; the last one is first looked at through O_PATH (so a FIFO or a
//           device is never opened at all), then opened with O_NONBLOCK as a second guard (cleared
//           again on a regular file unless asked for) and checked to be the file looked at
//
// Every directory on the way and the file must have an accepted owner (FileOwners), and neither
// may be writable by others (a directory only when sticky). A file that fails any check is
// refused with one line naming it and the reason, as an Error with errno EPERM:
//
//   refusing region file /dev/shm/hugepin/a1/rank-0: it is a symbolic link
//
// Thread-safety: free functions. The daemon's uid is looked up once, on first need.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/os.h"
#include "base/unique_fd.h"

namespace hugepin {

enum class FileType : uint8_t { kRegular, kDirectory };

enum class FileOwners : uint8_t {
  // Root, this process's effective user, the daemon's user (the system user `hugepin`, when it
  // exists), or anyone for a file shared with one of this process's groups (its group may read
  // and write it: what a group-shared arena is). For everything hugepin writes, maps or obeys.
  kTrusted,
  // Anyone: for what only a listing or the inspector reads and shows (the other checks apply).
  kAny,
};

struct FileRule {
  FileType type = FileType::kRegular;
  FileOwners owners = FileOwners::kTrusted;
  std::string_view what = "file";  // names the file in messages: "control segment", "region file"
};

// A path as base and below (see the file comment). `below` is relative, without "." or ".."
// components; empty names `base` itself.
struct TrustedPath {
  std::string base;
  std::string below;

  std::string full() const;
  // The same base, one component further down.
  TrustedPath child(std::string_view name) const;
};

// A file a user names on the command line or in a configuration: its directory is the base, its
// name the one component below it that is checked.
TrustedPath user_named(const std::string& path);

struct TrustedFile {
  UniqueFd fd;
  struct stat status {};
};

// The refusal errno: callers tell a planted file (EPERM) from a missing one (ENOENT).
inline constexpr int kRefusedErrno = EPERM;

// Opens `path` (see the file comment) with `flags` (O_PATH, O_RDONLY, O_RDWR, O_CREAT | O_EXCL,
// O_DIRECTORY, O_DIRECT, ...; O_NOFOLLOW and O_CLOEXEC are added) and `mode` for a file it
// creates. Returns it with its status. Throws Error: refused (kRefusedErrno, "refusing WHAT PATH:
// REASON"), or the failed call's errno ("cannot open WHAT PATH: ...": ENOENT, EEXIST, EINVAL for
// O_DIRECT, EACCES, ...).
TrustedFile open_trusted(Os& os, const TrustedPath& path, int flags, const FileRule& rule, mode_t mode = 0);

// Makes directory `path` (the last component of `below`) with `mode` when it is missing, then
// opens it as open_trusted(O_RDONLY | O_DIRECTORY) does (fchmod and fchown work on it). The
// components above it must exist.
TrustedFile make_trusted_dir(Os& os, const TrustedPath& path, mode_t mode, const FileRule& rule);

// True when `gid` is this process's effective group or one of its supplementary groups.
bool process_in_group(gid_t gid);

// Opens `path` with open_trusted(O_RDONLY) and reads it whole: at most `max_bytes`, or throws
// Error naming the path and the limit (a configuration of /dev/zero is refused, not read for ever).
std::string read_trusted_file(Os& os, const TrustedPath& path, const FileRule& rule, uint64_t max_bytes);
// The same for a file open_trusted opened: read from its start (pread), so it may be read again.
std::string read_opened_file(Os& os, const TrustedFile& file, const std::string& path, const FileRule& rule,
                             uint64_t max_bytes);

}  // namespace hugepin
