#include "daemon/quarantine.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <utility>

#include "base/error.h"
#include "base/file_status.h"
#include "base/trusted_file.h"
#include "base/unique_fd.h"
#include "hugemem/arena.h"
#include "hugemem/naming.h"
#include "ipc/control_segment.h"

namespace hugepin::daemon {
namespace {

// The entry subdirectory for data that lived under /dev/shm itself (see quarantine_arena).
constexpr std::string_view kDataSubdir = "data";

constexpr std::string_view kReasonFile = "reason";
// hugepind writes the reason itself: anything else found there (a link, a FIFO) is refused.
constexpr FileRule kReasonRule{FileType::kRegular, FileOwners::kTrusted, "quarantine reason"};
constexpr uint64_t kMaxReasonBytes = 64 * 1024;
constexpr std::string_view kSegmentFile = "control-segment";

std::string utc_stamp(int64_t realtime_ns) {
  const time_t seconds = static_cast<time_t>(realtime_ns / 1'000'000'000);
  tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  strftime(text, sizeof text, "%Y%m%dT%H%M%SZ", &utc);
  return text;
}

bool is_dir(Os& os, const std::string& path) {
  std::optional<struct stat> st = stat_no_follow(os, path);
  return st && S_ISDIR(st->st_mode);
}

std::string parent_dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos || slash == 0 ? std::string("/") : path.substr(0, slash);
}

// mkdir -p of `dir` below an existing `base` (modes: 0700 for what is made).
void make_dirs(Os& os, const std::string& dir) {
  if (is_dir(os, dir)) return;
  make_dirs(os, parent_dir(dir));
  if (int rc = os.mkdir(dir, 0700); rc < 0 && rc != -EEXIST) throw_errno(cat("cannot create ", dir), -rc);
}

// `dir` (just made, or found) must be this process's own and writable by no one else: under the
// world-writable roots (/dev/shm) another user could have made it first, then renamed or replaced
// what hugepind moves into it.
void check_private_dir(Os& os, const std::string& dir) {
  std::optional<struct stat> st = stat_no_follow(os, dir);
  if (!st || !S_ISDIR(st->st_mode)) throw Error(cat(dir, " is not a directory"));
  if (st->st_uid != geteuid() || (st->st_mode & 022) != 0) {
    throw Error(cat(dir, " belongs to uid ", st->st_uid, " with mode ", std::oct, (st->st_mode & 07777), std::dec,
                    ": not hugepind's own, refusing to quarantine into it"));
  }
}

// An entry name not yet taken: "<arena>.<stamp>", then "<arena>.<stamp>.2", ...
std::string free_entry_name(Os& os, std::string_view arena, int64_t realtime_ns) {
  const std::string base = cat(arena, ".", utc_stamp(realtime_ns));
  std::string name = base;
  for (int n = 2; is_dir(os, cat(quarantine_index_dir(), "/", name)); ++n) name = cat(base, ".", n);
  return name;
}

void write_reason(Os& os, const QuarantineEntry& entry, const std::vector<std::string>& failures) {
  std::string text = cat(entry.reason, "\n");
  for (const std::string& line : entry.moved) text += cat("moved: ", line, "\n");
  for (const std::string& line : failures) text += cat("not moved: ", line, "\n");
  const std::string path = cat(entry.path, "/", kReasonFile);
  UniqueFd file = open_trusted(os, user_named(path), O_WRONLY | O_CREAT | O_TRUNC, kReasonRule, 0600).fd;
  ssize_t n = os.pwrite(file.get(), text.data(), text.size(), 0);
  file.close();
  if (n != static_cast<ssize_t>(text.size())) throw_errno(cat("cannot write ", path), n < 0 ? static_cast<int>(-n) : EIO);
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// "YYYYmmddTHHMMSSZ"
bool is_stamp(std::string_view text) {
  if (text.size() != 16 || text[8] != 'T' || text[15] != 'Z') return false;
  for (size_t i = 0; i < 15; ++i) {
    if (i != 8 && (text[i] < '0' || text[i] > '9')) return false;
  }
  return true;
}

// The arena of entry "<arena>.<stamp>" or "<arena>.<stamp>.<n>"; "" when `name` is neither.
std::string arena_of_entry(std::string_view name) {
  for (size_t dot = name.rfind('.'); dot != std::string_view::npos && dot > 0; dot = name.rfind('.', dot - 1)) {
    std::string_view stamp = name.substr(dot + 1, 16);
    std::string_view after = name.substr(std::min(name.size(), dot + 17));
    if (is_stamp(stamp) && (after.empty() || after.front() == '.')) return std::string(name.substr(0, dot));
  }
  return "";
}

}  // namespace

std::string quarantine_index_dir() { return cat(kControlSegmentDir, "/", kDataDirName, "/", kQuarantineDirName); }

QuarantineEntry quarantine_arena(Os& os, std::string_view arena, std::string_view reason,
                                 const std::vector<std::string>& data_dirs, int64_t realtime_ns) {
  check_arena_name(arena);
  make_dirs(os, quarantine_index_dir());
  check_private_dir(os, quarantine_index_dir());
  QuarantineEntry entry;
  entry.arena = std::string(arena);
  entry.name = free_entry_name(os, arena, realtime_ns);
  entry.path = cat(quarantine_index_dir(), "/", entry.name);
  entry.reason = first_line(std::string(reason));
  if (int rc = os.mkdir(entry.path, 0700); rc < 0) throw_errno(cat("cannot create ", entry.path), -rc);

  std::vector<std::string> failures;
  std::vector<std::pair<std::string, std::string>> renamed;  // (from, to), to undo a partial move
  const std::string segment = control_segment_path(arena);
  const std::string segment_to = cat(entry.path, "/", kSegmentFile);
  if (int rc = os.rename(segment, segment_to); rc == 0) {
    entry.moved.push_back(cat(segment, " -> ", segment_to));
    renamed.emplace_back(segment, segment_to);
  } else if (rc != -ENOENT) {
    failures.push_back(cat(segment, ": ", errno_text(-rc)));
  }
  for (const std::string& dir : data_dirs) {
    // <root>/hugepin/<arena> -> <root>/hugepin/.quarantine/<entry>: the same file system. When the
    // root is /dev/shm itself (4 KiB regions), that is the index entry, which already holds the
    // segment: the data goes in it, as data/.
    std::string to = cat(parent_dir(dir), "/", kQuarantineDirName, "/", entry.name);
    if (to == entry.path) to = cat(entry.path, "/", kDataSubdir);
    try {
      make_dirs(os, cat(parent_dir(dir), "/", kQuarantineDirName));
      check_private_dir(os, cat(parent_dir(dir), "/", kQuarantineDirName));
    } catch (const Error& error) {
      failures.push_back(cat(dir, ": ", error.what()));
      continue;
    }
    if (int rc = os.rename(dir, to); rc == 0) {
      entry.moved.push_back(cat(dir, " -> ", to));
      renamed.emplace_back(dir, to);
    } else if (rc != -ENOENT) {
      failures.push_back(cat(dir, ": ", errno_text(-rc)));
    }
  }
  if (!failures.empty() && !renamed.empty()) {
    // Part of the arena moved, part did not. Data left without its segment would look stale and
    // could be removed by the reaper: put back what moved, and leave the arena as it was.
    for (auto it = renamed.rbegin(); it != renamed.rend(); ++it) os.rename(it->second, it->first);
    os.rmdir(entry.path);
    throw Error(cat("could not quarantine arena '", arena, "' (left as it was): ", failures.front()));
  }
  if (entry.moved.empty()) {
    os.rmdir(entry.path);  // an entry that holds nothing would only mislead
    throw Error(cat("could not quarantine arena '", arena, "': ",
                    failures.empty() ? std::string("none of its files exists any more") : failures.front()));
  }
  write_reason(os, entry, failures);
  return entry;
}

std::vector<QuarantineEntry> list_quarantine(Os& os, std::string_view prefix) {
  std::vector<QuarantineEntry> entries;
  std::vector<std::string> names;
  if (os.list_data_dir(quarantine_index_dir(), &names) < 0) return entries;
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    std::string arena = arena_of_entry(name);
    if (arena.empty() || arena.compare(0, prefix.size(), prefix) != 0) continue;
    QuarantineEntry entry;
    entry.arena = std::move(arena);
    entry.name = name;
    entry.path = cat(quarantine_index_dir(), "/", name);
    std::string text;
    try {
      text = read_trusted_file(os, {entry.path, std::string(kReasonFile)}, kReasonRule, kMaxReasonBytes);
    } catch (const Error& error) {
      entry.reason = error.errno_value() == kRefusedErrno ? error.what() : "";  // a planted reason says so
    }
    if (!text.empty()) {
      entry.reason = first_line(text);
      std::string_view rest(text);
      while (!rest.empty()) {
        std::string_view line = rest.substr(0, rest.find('\n'));
        rest = rest.size() > line.size() ? rest.substr(line.size() + 1) : std::string_view();
        if (line.substr(0, 7) == "moved: ") entry.moved.emplace_back(line.substr(7));
      }
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::vector<std::string> arena_data_dirs(Os& os, std::string_view arena, const std::vector<std::string>& recorded_paths,
                                         const ArenaOptions& where) {
  std::vector<std::string> dirs;
  auto add = [&](const std::string& dir) {
    if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end() && is_dir(os, dir)) dirs.push_back(dir);
  };
  for (const std::string& path : recorded_paths) {
    // Only a directory that follows the naming scheme for this arena: a corrupt segment must not
    // send anything else into quarantine.
    const std::string dir = parent_dir(path);
    const std::string suffix = cat("/", kDataDirName, "/", arena);
    if (dir.size() > suffix.size() && dir.compare(dir.size() - suffix.size(), suffix.size(), suffix) == 0) add(dir);
  }
  for (const std::string& root : arena_data_roots(os, where)) add(arena_data_dir(root, arena));
  return dirs;
}

}  // namespace hugepin::daemon
