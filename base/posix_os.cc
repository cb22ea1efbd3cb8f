// The real Os: thin wrappers over system calls, capturing errno at each call.
#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <numaif.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <charconv>
#include <csignal>
#include <ctime>

#include "base/error.h"
#include "base/os.h"
#include "base/timer_slack.h"

namespace hugepin {
namespace {

int result_or_errno(long result) { return result < 0 ? -errno : static_cast<int>(result); }

// clock_gettime cannot fail for the clocks asked for here (valid ids, a valid pointer).
int64_t clock_ns(clockid_t clock) {
  timespec now{};
  ::clock_gettime(clock, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

// The sockaddr_un of `address`: a path, or '@' and an abstract name. -ENAMETOOLONG when it does
// not fit.
int unix_address(const std::string& address, sockaddr_un* out, socklen_t* length) {
  *out = sockaddr_un{};
  out->sun_family = AF_UNIX;
  if (address.empty()) return -EINVAL;
  if (address.size() >= sizeof out->sun_path) return -ENAMETOOLONG;
  address.copy(out->sun_path, address.size());
  if (address[0] == '@') {
    out->sun_path[0] = '\0';
    *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size());
  } else {
    *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size() + 1);
  }
  return 0;
}

// The supplementary groups of the peer of `fd`; empty where the kernel cannot say.
std::vector<gid_t> peer_groups(int fd) {
  std::vector<gid_t> groups(64);
  for (int attempt = 0; attempt < 4; ++attempt) {
    socklen_t bytes = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &bytes) == 0) {
      groups.resize(bytes / sizeof(gid_t));
      return groups;
    }
    if (errno != ERANGE) break;
    groups.resize(bytes / sizeof(gid_t) + 1);  // the kernel says how many it needs
  }
  return {};
}

// Reads and closes `dir`.
int read_directory(DIR* dir, std::vector<std::string>* names) {
  names->clear();
  errno = 0;
  while (dirent* entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (name != "." && name != "..") names->emplace_back(name);
  }
  int error = errno;
  ::closedir(dir);
  return error != 0 ? -error : 0;
}

int list_directory(const std::string& path, std::vector<std::string>* names) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return -errno;
  return read_directory(dir, names);
}

int read_whole_file(const std::string& path, std::string* contents) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  contents->clear();
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      int error = errno;
      ::close(fd);
      return -error;
    }
    if (n == 0) break;
    contents->append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return 0;
}

class PosixOs final : public Os {
 public:
  explicit PosixOs(std::string root) : root_(std::move(root)) {
    while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  }

  int read_file(const std::string& path, std::string* contents) override {
    return read_whole_file(resolve(path), contents);
  }

  int write_file(const std::string& path, std::string_view contents) override {
    int fd = ::open(resolve(path).c_str(), O_WRONLY | O_CLOEXEC | O_TRUNC);
    if (fd < 0) return -errno;
    // Kernel knobs take one write; a short write to sysfs is an error, not a retry.
    ssize_t n = ::write(fd, contents.data(), contents.size());
    int error = n < 0 ? errno : (static_cast<size_t>(n) != contents.size() ? EIO : 0);
    ::close(fd);
    return -error;
  }

  int list_dir(const std::string& path, std::vector<std::string>* names) override {
    return list_directory(resolve(path), names);
  }

  const std::string& system_root() const override { return root_; }

  int open(const std::string& path, int flags, mode_t mode) override {
    return result_or_errno(::open(path.c_str(), flags | O_CLOEXEC, mode));
  }
  int close(int fd) override { return result_or_errno(::close(fd)); }
  int ftruncate(int fd, uint64_t size) override {
    return result_or_errno(::ftruncate(fd, static_cast<off_t>(size)));
  }
  int fstat(int fd, struct stat* out) override { return result_or_errno(::fstat(fd, out)); }
  int fstatfs(int fd, struct statfs* out) override { return result_or_errno(::fstatfs(fd, out)); }
  int fchmod(int fd, mode_t mode) override { return result_or_errno(::fchmod(fd, mode)); }
  int fchown(int fd, uid_t uid, gid_t gid) override {
    return result_or_errno(::fchown(fd, uid, gid));
  }
  int unlink(const std::string& path) override { return result_or_errno(::unlink(path.c_str())); }
  int mkdir(const std::string& path, mode_t mode) override {
    return result_or_errno(::mkdir(path.c_str(), mode));
  }
  int rmdir(const std::string& path) override { return result_or_errno(::rmdir(path.c_str())); }
  int list_data_dir(const std::string& path, std::vector<std::string>* names) override {
    return list_directory(path, names);
  }
  int openat(int dir_fd, const std::string& name, int flags, mode_t mode) override {
    return result_or_errno(::openat(dir_fd, name.c_str(), flags | O_CLOEXEC, mode));
  }
  int mkdirat(int dir_fd, const std::string& name, mode_t mode) override {
    return result_or_errno(::mkdirat(dir_fd, name.c_str(), mode));
  }
  int unlinkat(int dir_fd, const std::string& name, int flags) override {
    return result_or_errno(::unlinkat(dir_fd, name.c_str(), flags));
  }
  int list_dir_at(int dir_fd, std::vector<std::string>* names) override {
    // A descriptor of its own: closedir closes it, and `dir_fd` may be O_PATH (no reading).
    const int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -errno;
    DIR* dir = ::fdopendir(fd);
    if (dir == nullptr) {
      const int error = errno;
      ::close(fd);
      return -error;
    }
    return read_directory(dir, names);
  }
  int set_blocking(int fd) override {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0) return -errno;
    return result_or_errno(::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK));
  }
  ssize_t pread(int fd, void* data, size_t bytes, uint64_t offset) override {
    ssize_t n = ::pread(fd, data, bytes, static_cast<off_t>(offset));
    return n < 0 ? -errno : n;
  }
  ssize_t pwrite(int fd, const void* data, size_t bytes, uint64_t offset) override {
    ssize_t n = ::pwrite(fd, data, bytes, static_cast<off_t>(offset));
    return n < 0 ? -errno : n;
  }
  int fsync(int fd) override { return result_or_errno(::fsync(fd)); }
  int fdatasync(int fd) override { return result_or_errno(::fdatasync(fd)); }
  int fallocate(int fd, uint64_t offset, uint64_t length) override {
    return result_or_errno(::fallocate(fd, 0, static_cast<off_t>(offset), static_cast<off_t>(length)));
  }
  int fadvise(int fd, uint64_t offset, uint64_t length, int advice) override {
    // posix_fadvise returns the error number itself and leaves errno alone.
    return -::posix_fadvise(fd, static_cast<off_t>(offset), static_cast<off_t>(length), advice);
  }
  int fstatx(int fd, unsigned mask, struct statx* out) override {
    return result_or_errno(::statx(fd, "", AT_EMPTY_PATH, mask, out));
  }
  int rename(const std::string& from, const std::string& to) override {
    return result_or_errno(::rename(from.c_str(), to.c_str()));
  }
  int read_data_file(const std::string& path, std::string* contents) override {
    return read_whole_file(path, contents);
  }
  int flock(int fd, int operation) override { return result_or_errno(::flock(fd, operation)); }
  int fcntl_lock(int fd, int command, struct flock* lock) override { return result_or_errno(::fcntl(fd, command, lock)); }
  int mount(const std::string& source, const std::string& target, const std::string& fstype,
            unsigned long flags, const std::string& data) override {
    return result_or_errno(
        ::mount(source.c_str(), target.c_str(), fstype.c_str(), flags, data.c_str()));
  }
  int umount(const std::string& target) override {
    return result_or_errno(::umount(target.c_str()));
  }

  int mmap(size_t length, int prot, int flags, int fd, off_t offset, void** out) override {
    void* addr = ::mmap(nullptr, length, prot, flags, fd, offset);
    if (addr == MAP_FAILED) return -errno;
    *out = addr;
    return 0;
  }
  int munmap(void* addr, size_t length) override { return result_or_errno(::munmap(addr, length)); }
  int madvise(void* addr, size_t length, int advice) override {
    return result_or_errno(::madvise(addr, length, advice));
  }
  int mbind(void* addr, size_t length, int mode, const unsigned long* nodemask,
            unsigned long maxnode, unsigned flags) override {
    // The system call itself, not libnuma's wrapper: the LD_PRELOAD shim must not depend on
    // libnuma.so being installed.
    return result_or_errno(::syscall(SYS_mbind, addr, length, mode, nodemask, maxnode, flags));
  }
  int query_page_nodes(size_t count, void* const* pages, int* nodes) override {
    // move_pages with nodes == NULL only reports where each page is; it moves nothing.
    long result = ::syscall(SYS_move_pages, 0, count, pages, nullptr, nodes, 0);
    return result < 0 ? -errno : 0;
  }

  int set_timer_slack_ns(uint64_t ns) override {
    return ::prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(ns), 0UL, 0UL, 0UL) < 0 ? -errno : 0;
  }

  int set_thread_cpus(const std::vector<int>& cpus) override {
    if (cpus.empty()) return 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : cpus) {
      if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
    }
    return -pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  }

  int send_signal(pid_t pid, int signal) override { return result_or_errno(::kill(pid, signal)); }
  int pidfd_open(pid_t pid) override {
#ifdef SYS_pidfd_open
    return result_or_errno(::syscall(SYS_pidfd_open, pid, 0));  // pidfds are always close-on-exec
#else
    (void)pid;
    return -ENOSYS;
#endif
  }

  int64_t monotonic_ns() override { return clock_ns(CLOCK_MONOTONIC); }
  int64_t realtime_ns() override { return clock_ns(CLOCK_REALTIME); }

  int futex_wait(const std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns, int64_t slack_ns) override {
    timespec timeout{};
    timespec* limit = nullptr;
    if (timeout_ns >= 0) {
      timeout.tv_sec = static_cast<time_t>(timeout_ns / 1'000'000'000);
      timeout.tv_nsec = static_cast<long>(timeout_ns % 1'000'000'000);
      limit = &timeout;
    }
    const TimerSlackScope slack(limit != nullptr ? slack_ns : 0);
    // Shared (no FUTEX_PRIVATE_FLAG): the waker may be another process mapping the same file.
    return result_or_errno(::syscall(SYS_futex, word, FUTEX_WAIT, expected, limit, nullptr, 0));
  }

  int futex_wake(const std::atomic<uint32_t>* word, int count) override {
    return result_or_errno(::syscall(SYS_futex, word, FUTEX_WAKE, count, nullptr, nullptr, 0));
  }

  int membarrier(int command) override { return result_or_errno(::syscall(SYS_membarrier, command, 0, 0)); }

  int listen_unix(const std::string& path, int backlog) override {
    sockaddr_un address;
    socklen_t length = 0;
    if (int rc = unix_address(path, &address, &length); rc < 0) return rc;
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), length) < 0 || ::listen(fd, backlog) < 0) {
      int error = errno;
      ::close(fd);
      return -error;
    }
    return fd;
  }

  int connect_unix(const std::string& path) override {
    sockaddr_un address;
    socklen_t length = 0;
    if (int rc = unix_address(path, &address, &length); rc < 0) return rc;
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int rc = 0;
    do {
      rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), length);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0) {
      int error = errno;
      ::close(fd);
      return -error;
    }
    return fd;
  }

  int accept_unix(int listen_fd, PeerCredentials* peer) override {
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return -errno;
    ucred credentials{};
    socklen_t length = sizeof credentials;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) < 0) {
      int error = errno;
      ::close(fd);
      return -error;
    }
    peer->pid = credentials.pid;
    peer->uid = credentials.uid;
    peer->gid = credentials.gid;
    peer->groups = peer_groups(fd);
    return fd;
  }

  ssize_t read(int fd, void* data, size_t bytes) override {
    ssize_t n = ::read(fd, data, bytes);
    return n < 0 ? -errno : n;
  }
  ssize_t write(int fd, const void* data, size_t bytes) override {
    ssize_t n = ::write(fd, data, bytes);
    return n < 0 ? -errno : n;
  }
  ssize_t send(int fd, const void* data, size_t bytes) override {
    ssize_t n = ::send(fd, data, bytes, MSG_NOSIGNAL);
    return n < 0 ? -errno : n;
  }

  int send_datagram(const std::string& address, std::string_view message) override {
    sockaddr_un target;
    socklen_t length = 0;
    if (int rc = unix_address(address, &target, &length); rc < 0) return rc;
    int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    // MSG_DONTWAIT: a receiver that stopped reading (a hung service manager) must not hold the
    // sender up once its queue (net.unix.max_dgram_qlen datagrams) is full.
    ssize_t n = ::sendto(fd, message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT,
                         reinterpret_cast<const sockaddr*>(&target), length);
    int error = n < 0 ? errno : (static_cast<size_t>(n) != message.size() ? EMSGSIZE : 0);
    ::close(fd);
    return -error;
  }

  int poll(struct pollfd* fds, size_t count, int timeout_ms) override {
    return result_or_errno(::poll(fds, static_cast<nfds_t>(count), timeout_ms));
  }

  int signal_fd(const sigset_t& signals) override {
    if (int rc = ::pthread_sigmask(SIG_BLOCK, &signals, nullptr); rc != 0) return -rc;
    return result_or_errno(::signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC));
  }

  int event_fd() override { return result_or_errno(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)); }

  int chmod(const std::string& path, mode_t mode) override { return result_or_errno(::chmod(path.c_str(), mode)); }
  int chown(const std::string& path, uid_t uid, gid_t gid) override {
    return result_or_errno(::chown(path.c_str(), uid, gid));
  }

 private:
  std::string resolve(const std::string& path) const {
    return root_ == "/" ? path : root_ + path;
  }

  std::string root_;
};

}  // namespace

Os& real_os() {
  static PosixOs os("/");
  return os;
}

std::unique_ptr<Os> make_rooted_os(std::string system_root) {
  return std::make_unique<PosixOs>(std::move(system_root));
}

double seconds_since(Os& os, int64_t start_ns) { return static_cast<double>(os.monotonic_ns() - start_ns) / 1e9; }

std::string read_kernel_text(Os& os, const std::string& path) {
  std::string contents;
  if (int rc = os.read_file(path, &contents); rc < 0) throw_errno(cat("cannot read ", path), -rc);
  return contents;
}

uint64_t read_kernel_u64(Os& os, const std::string& path) {
  std::string contents = read_kernel_text(os, path);
  std::string_view text = contents;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    throw Error(cat("malformed kernel file ", path, ": '", text.substr(0, 40),
                    "' is not an unsigned number"));
  }
  return value;
}

}  // namespace hugepin
