#include "hugemem/mounts.h"

#include <cerrno>
#include <cstdio>
#include <sstream>

#include "base/error.h"
#include "base/size.h"

namespace hugepin {
namespace {

// /proc/mounts escapes space, tab, newline and backslash as \ooo.
std::string unescape_mount_field(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      int value = 0;
      bool octal = true;
      for (size_t k = 1; k <= 3; ++k) {
        char c = field[i + k];
        octal = octal && c >= '0' && c <= '7';
        value = value * 8 + (c - '0');
      }
      if (octal) {
        out.push_back(static_cast<char>(value));
        i += 3;
        continue;
      }
    }
    out.push_back(field[i]);
  }
  return out;
}

std::optional<uint64_t> pagesize_option(const std::string& options) {
  std::stringstream stream(options);
  std::string option;
  while (std::getline(stream, option, ',')) {
    if (option.rfind("pagesize=", 0) == 0) return parse_size(option.substr(9));
  }
  return std::nullopt;
}

int mkdir_parents(Os& os, const std::string& dir, mode_t mode) {
  for (size_t slash = dir.find('/', 1); ; slash = dir.find('/', slash + 1)) {
    std::string prefix = dir.substr(0, slash);
    int rc = os.mkdir(prefix, slash == std::string::npos ? mode : 0755);
    if (rc < 0 && rc != -EEXIST) return rc;
    if (slash == std::string::npos) return 0;
  }
}

}  // namespace

uint64_t read_meminfo_bytes(Os& os, std::string_view field) {
  std::string meminfo;
  if (os.read_file("/proc/meminfo", &meminfo) < 0) return 0;
  const std::string prefix = cat(field, ":");
  std::istringstream lines(meminfo);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream fields(line.substr(prefix.size()));
    uint64_t kib = 0;
    if (fields >> kib) return kib * kKiB;
  }
  return 0;
}

uint64_t read_default_page_size(Os& os) { return read_meminfo_bytes(os, "Hugepagesize"); }

std::vector<HugetlbfsMount> read_hugetlbfs_mounts(Os& os, uint64_t default_page_size) {
  std::string table = read_kernel_text(os, "/proc/mounts");
  std::vector<HugetlbfsMount> mounts;
  std::istringstream lines(table);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string source, dir, type, options;
    if (!(fields >> source >> dir >> type >> options) || type != "hugetlbfs") continue;
    HugetlbfsMount mount;
    mount.dir = unescape_mount_field(dir);
    mount.options = options;
    mount.page_size = pagesize_option(options).value_or(default_page_size);
    mounts.push_back(std::move(mount));
  }
  return mounts;
}

std::optional<HugetlbfsMount> find_hugetlbfs_mount(const std::vector<HugetlbfsMount>& mounts,
                                                   uint64_t page_size) {
  const HugetlbfsMount* chosen = nullptr;
  for (const HugetlbfsMount& mount : mounts) {
    if (mount.page_size != page_size) continue;
    bool preferred = mount.dir.rfind("/dev/hugepages", 0) == 0;
    if (chosen == nullptr || (preferred && chosen->dir.rfind("/dev/hugepages", 0) != 0)) {
      chosen = &mount;
    }
  }
  if (chosen == nullptr) return std::nullopt;
  return *chosen;
}

std::string default_mount_dir(uint64_t page_size) {
  return page_size == kGiB ? "/dev/hugepages1G" : "/dev/hugepages";
}

bool mount_hugetlbfs(Os& os, const MountRequest& request) {
  uint64_t default_size = read_default_page_size(os);
  for (const HugetlbfsMount& mount : read_hugetlbfs_mounts(os, default_size)) {
    if (mount.dir != request.dir) continue;
    if (mount.page_size == request.page_size) return false;
    throw Error(cat(request.dir, " already holds a hugetlbfs mount of ",
                    page_size_name(mount.page_size), " pages, not ",
                    page_size_name(request.page_size), ": choose another --dir"));
  }
  if (int rc = mkdir_parents(os, request.dir, 0755); rc < 0) {
    throw_errno(cat("cannot create mount point ", request.dir), -rc);
  }
  std::string data = cat("pagesize=", page_size_name(request.page_size));
  char mode[16];
  std::snprintf(mode, sizeof mode, "%o", static_cast<unsigned>(request.mode));
  data += cat(",mode=", mode);
  if (request.uid) data += cat(",uid=", *request.uid);
  if (request.gid) data += cat(",gid=", *request.gid);
  if (int rc = os.mount("hugetlbfs", request.dir, "hugetlbfs", 0, data); rc < 0) {
    std::string hint = rc == -EPERM ? " (mounting needs root or CAP_SYS_ADMIN)"
                       : rc == -EINVAL ? cat(" (does the kernel support ",
                                             page_size_name(request.page_size), " pages?)")
                                       : "";
    throw_errno(cat("cannot mount hugetlbfs (", data, ") on ", request.dir, hint), -rc);
  }
  return true;
}

}  // namespace hugepin
