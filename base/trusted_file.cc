#include "base/trusted_file.h"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <optional>
#include <vector>

#include "base/error.h"

namespace hugepin {
namespace {

constexpr std::string_view kDaemonUser = "hugepin";

// The uid of the daemon's system user (sysusers.d), when there is one. Looked up only when a file
// is owned by neither root nor this process, so most processes never ask the user database.
std::optional<uid_t> daemon_uid() {
  static const std::optional<uid_t> uid = []() -> std::optional<uid_t> {
    passwd entry{};
    passwd* found = nullptr;
    char buffer[1024];
    if (getpwnam_r(std::string(kDaemonUser).c_str(), &entry, buffer, sizeof buffer, &found) == 0 && found != nullptr) {
      return found->pw_uid;
    }
    return std::nullopt;
  }();
  return uid;
}

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

std::string_view type_name(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a file";
}

bool owner_accepted(const struct stat& status, FileOwners owners) {
  if (owners == FileOwners::kAny || status.st_uid == 0 || status.st_uid == geteuid()) return true;
  const mode_t shared = S_ISDIR(status.st_mode) ? 0070 : 0060;
  if ((status.st_mode & shared) == shared && process_in_group(status.st_gid)) return true;
  const std::optional<uid_t> daemon = daemon_uid();
  return daemon && status.st_uid == *daemon;
}

// What is wrong with `status` under `rule`, as a predicate for a subject ("is a FIFO, not a
// regular file"); "" when nothing is.
std::string problem(const struct stat& status, const FileRule& rule) {
  const bool want_dir = rule.type == FileType::kDirectory;
  if (want_dir ? !S_ISDIR(status.st_mode) : !S_ISREG(status.st_mode)) {
    return cat("is ", type_name(status.st_mode), ", not ", want_dir ? "a directory" : "a regular file");
  }
  if ((status.st_mode & S_IWOTH) != 0 && !(want_dir && (status.st_mode & S_ISVTX) != 0)) {
    return cat("is writable by every user (mode ", mode_text(status.st_mode), ")", want_dir ? " and not sticky" : "");
  }
  if (!owner_accepted(status, rule.owners)) {
    return cat("belongs to uid ", status.st_uid, " (mode ", mode_text(status.st_mode),
               "), not to root, this process's uid ", geteuid(), ", hugepind's user or one of this process's groups");
  }
  return "";
}

[[noreturn]] void refuse(const FileRule& rule, const std::string& path, std::string_view reason) {
  throw Error(cat("refusing ", rule.what, " ", path, ": ", reason), kRefusedErrno);
}

[[noreturn]] void fail(const FileRule& rule, const std::string& path, int errno_value) {
  // A link met with O_NOFOLLOW, or a socket met by open: refusals, not failures.
  if (errno_value == ELOOP) refuse(rule, path, "it is a symbolic link");
  if (errno_value == ENXIO) refuse(rule, path, "it is not a regular file (a socket or a device without a driver)");
  throw_errno(cat("cannot open ", rule.what, " ", path), errno_value);
}

std::vector<std::string> components(const TrustedPath& path, const FileRule& rule) {
  std::vector<std::string> parts;
  std::string_view rest = path.below;
  while (!rest.empty()) {
    const size_t slash = rest.find('/');
    const std::string_view part = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (part.empty()) continue;
    if (part == "." || part == "..") refuse(rule, path.full(), cat("'", part, "' is not a file name"));
    parts.emplace_back(part);
  }
  return parts;
}

struct Parent {
  UniqueFd fd;
  std::string path;      // the directory's full path, for messages
  std::string name;      // the last component ("" when `below` is empty)
};

// Opens path.base and every component of path.below but the last, checking each.
Parent walk_to_parent(Os& os, const TrustedPath& path, const FileRule& rule) {
  const std::string full = path.full();
  const FileRule dir_rule{FileType::kDirectory, rule.owners, rule.what};
  Parent parent;
  parent.path = path.base;
  const int base = os.open(path.base, O_PATH | O_DIRECTORY, 0);
  if (base < 0) {
    if (base == -ENOENT || base == -ENOTDIR) {
      throw_errno(cat("cannot open ", rule.what, " ", full, " (", path.base, ")"), -base);
    }
    fail(rule, full, -base);
  }
  parent.fd = UniqueFd(os, base);
  struct stat status {};
  if (int rc = os.fstat(base, &status); rc < 0) fail(rule, full, -rc);
  // The operator chose the base: any owner, but never a directory where others may swap entries.
  if (std::string why = problem(status, {FileType::kDirectory, FileOwners::kAny, rule.what}); !why.empty()) {
    refuse(rule, full, cat(path.base, " ", why));
  }
  std::vector<std::string> parts = components(path, rule);
  if (parts.empty()) return parent;
  parent.name = parts.back();
  parts.pop_back();
  for (const std::string& part : parts) {
    parent.path += "/" + part;
    const int fd = os.openat(parent.fd.get(), part, O_PATH | O_NOFOLLOW, 0);
    if (fd < 0) fail(rule, full, -fd);
    parent.fd = UniqueFd(os, fd);
    if (int rc = os.fstat(fd, &status); rc < 0) fail(rule, full, -rc);
    if (std::string why = problem(status, dir_rule); !why.empty()) refuse(rule, full, cat(parent.path, " ", why));
  }
  return parent;
}

// The last component of `path`, in `parent`, looked at through O_PATH (which opens nothing: a
// FIFO cannot block it, a device driver never sees it). nullopt when it does not exist.
std::optional<TrustedFile> look_at(Os& os, const Parent& parent, const std::string& full, const FileRule& rule) {
  const int fd = os.openat(parent.fd.get(), parent.name, O_PATH | O_NOFOLLOW, 0);
  if (fd == -ENOENT) return std::nullopt;
  if (fd < 0) fail(rule, full, -fd);
  TrustedFile file;
  file.fd = UniqueFd(os, fd);
  if (int rc = os.fstat(fd, &file.status); rc < 0) fail(rule, full, -rc);
  if (std::string why = problem(file.status, rule); !why.empty()) refuse(rule, full, cat("it ", why));
  return file;
}

}  // namespace

bool process_in_group(gid_t gid) {
  if (getegid() == gid) return true;
  const int count = getgroups(0, nullptr);
  if (count <= 0) return false;
  std::vector<gid_t> groups(static_cast<size_t>(count));
  const int filled = getgroups(count, groups.data());
  for (int i = 0; i < filled; ++i) {
    if (groups[static_cast<size_t>(i)] == gid) return true;
  }
  return false;
}

std::string TrustedPath::full() const { return below.empty() ? base : cat(base, "/", below); }

TrustedPath TrustedPath::child(std::string_view name) const {
  return {base, below.empty() ? std::string(name) : cat(below, "/", name)};
}

TrustedPath user_named(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? std::string("/") : path.substr(0, slash), path.substr(slash + 1)};
}

TrustedFile open_trusted(Os& os, const TrustedPath& path, int flags, const FileRule& rule, mode_t mode) {
  const std::string full = path.full();
  Parent parent = walk_to_parent(os, path, rule);
  if (parent.name.empty()) {
    if (rule.type != FileType::kDirectory) refuse(rule, full, "it is a directory, not a regular file");
    const int fd = os.openat(parent.fd.get(), ".", flags | O_DIRECTORY, 0);
    if (fd < 0) fail(rule, full, -fd);
    TrustedFile file{UniqueFd(os, fd), {}};
    if (int rc = os.fstat(fd, &file.status); rc < 0) fail(rule, full, -rc);
    return file;
  }
  // O_CREAT | O_EXCL opens nothing that exists, links included: nothing to look at first.
  const bool exclusive = (flags & O_CREAT) != 0 && (flags & O_EXCL) != 0;
  std::optional<TrustedFile> seen;
  if (!exclusive) {
    seen = look_at(os, parent, full, rule);
    if (!seen && (flags & O_CREAT) == 0) throw_errno(cat("cannot open ", rule.what, " ", full), ENOENT);
    if (seen && (flags & O_PATH) != 0) return std::move(*seen);
  }
  const int fd = os.openat(parent.fd.get(), parent.name, flags | O_NOFOLLOW | O_NONBLOCK, mode);
  if (fd < 0) fail(rule, full, -fd);
  TrustedFile file{UniqueFd(os, fd), {}};
  if (int rc = os.fstat(fd, &file.status); rc < 0) fail(rule, full, -rc);
  if (std::string why = problem(file.status, rule); !why.empty()) refuse(rule, full, cat("it ", why));
  if (seen && (seen->status.st_dev != file.status.st_dev || seen->status.st_ino != file.status.st_ino)) {
    refuse(rule, full, "it was replaced while being opened");
  }
  if ((flags & O_NONBLOCK) == 0 && S_ISREG(file.status.st_mode)) {
    if (int rc = os.set_blocking(fd); rc < 0) fail(rule, full, -rc);
  }
  return file;
}

TrustedFile make_trusted_dir(Os& os, const TrustedPath& path, mode_t mode, const FileRule& rule) {
  Parent parent = walk_to_parent(os, path, rule);
  if (!parent.name.empty()) {
    if (int rc = os.mkdirat(parent.fd.get(), parent.name, mode); rc < 0 && rc != -EEXIST) {
      throw_errno(cat("cannot create ", rule.what, " ", path.full()), -rc);
    }
  }
  return open_trusted(os, path, O_RDONLY | O_DIRECTORY, rule);
}

std::string read_trusted_file(Os& os, const TrustedPath& path, const FileRule& rule, uint64_t max_bytes) {
  return read_opened_file(os, open_trusted(os, path, O_RDONLY, rule), path.full(), rule, max_bytes);
}

std::string read_opened_file(Os& os, const TrustedFile& file, const std::string& path, const FileRule& rule,
                             uint64_t max_bytes) {
  auto too_long = [&] {
    throw Error(cat(rule.what, " ", path, " is more than ", max_bytes, " bytes: not a ", rule.what, " hugepin reads"),
                EFBIG);
  };
  if (static_cast<uint64_t>(file.status.st_size) > max_bytes) too_long();
  std::string text;
  char buffer[16384];
  for (;;) {
    const ssize_t n = os.pread(file.fd.get(), buffer, sizeof buffer, text.size());
    if (n == -EINTR) continue;
    if (n < 0) throw_errno(cat("cannot read ", rule.what, " ", path), static_cast<int>(-n));
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > max_bytes) too_long();  // it grew while being read
  }
  return text;
}

}  // namespace hugepin
