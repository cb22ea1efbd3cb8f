// The one seam between hugepin and the kernel.
//
// Every file, memory and kernel-knob call of the library goes through an Os (mimalloc's prim.h,
// leveldb's Env), so tests can point it at a recorded sysfs tree, play a kernel that answers
// differently, or inject failures — on a machine with one NUMA node and no hugepages.
//
// Contract of every method: returns 0 (or a non-negative result) on success and -errno on
// failure; never throws; never reads or leaves the global errno. Implementations are
// thread-safe.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hugepin {

// Who is at the other end of a Unix socket, as the kernel recorded it when the peer connected
// (SO_PEERCRED) and its supplementary groups (SO_PEERGROUPS).
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

class Os {
 public:
  virtual ~Os() = default;

  // Kernel files: absolute /sys and /proc paths, resolved under this Os's system root.
  virtual int read_file(const std::string& path, std::string* contents) = 0;
  virtual int write_file(const std::string& path, std::string_view contents) = 0;
  virtual int list_dir(const std::string& path, std::vector<std::string>* names) = 0;
  // The root that kernel paths resolve under ("/" on a real system).
  virtual const std::string& system_root() const = 0;

  // Data files, on real paths (hugetlbfs mounts, /dev/shm). open returns the descriptor.
  virtual int open(const std::string& path, int flags, mode_t mode) = 0;
  virtual int close(int fd) = 0;
  virtual int ftruncate(int fd, uint64_t size) = 0;
  virtual int fstat(int fd, struct stat* out) = 0;
  virtual int fstatfs(int fd, struct statfs* out) = 0;
  virtual int fchmod(int fd, mode_t mode) = 0;
  virtual int fchown(int fd, uid_t uid, gid_t gid) = 0;
  virtual int unlink(const std::string& path) = 0;
  virtual int mkdir(const std::string& path, mode_t mode) = 0;
  virtual int rmdir(const std::string& path) = 0;
  // Real directory listing (not under the system root), for data directories.
  virtual int list_data_dir(const std::string& path, std::vector<std::string>* names) = 0;
  // Relative to an open directory `dir_fd` (O_PATH is enough), one component `name` at a time:
  // how base/trusted_file.h walks a path without following a link another user planted.
  virtual int openat(int dir_fd, const std::string& name, int flags, mode_t mode) = 0;
  virtual int mkdirat(int dir_fd, const std::string& name, mode_t mode) = 0;
  // unlinkat(2): AT_REMOVEDIR in `flags` removes an empty directory.
  virtual int unlinkat(int dir_fd, const std::string& name, int flags) = 0;
  // The names in directory `dir_fd` (no "." or ".."); `dir_fd` itself is left as it was.
  virtual int list_dir_at(int dir_fd, std::vector<std::string>* names) = 0;
  // Clears O_NONBLOCK on `fd` (fcntl F_SETFL): a file opened without blocking, checked, then used
  // as usual (io_uring, for one, treats a non-blocking regular file differently).
  virtual int set_blocking(int fd) = 0;
  // Data file contents and durability (the disk tier). pread/pwrite return the bytes moved,
  // which may be fewer than asked (callers continue from there).
  virtual ssize_t pread(int fd, void* data, size_t bytes, uint64_t offset) = 0;
  virtual ssize_t pwrite(int fd, const void* data, size_t bytes, uint64_t offset) = 0;
  virtual int fsync(int fd) = 0;
  virtual int fdatasync(int fd) = 0;
  // Allocates [offset, offset + length) on disk (fallocate(2), mode 0): -ENOSPC now rather
  // than in the middle of a write; -EOPNOTSUPP where the file system cannot.
  virtual int fallocate(int fd, uint64_t offset, uint64_t length) = 0;
  // posix_fadvise(2): POSIX_FADV_DONTNEED drops the file's clean cached pages.
  virtual int fadvise(int fd, uint64_t offset, uint64_t length, int advice) = 0;
  // statx(2) of an open descriptor; `mask` as for statx (STATX_DIOALIGN: direct I/O alignment).
  virtual int fstatx(int fd, unsigned mask, struct statx* out) = 0;
  // rename(2): atomic replacement of `to` within one file system.
  virtual int rename(const std::string& from, const std::string& to) = 0;
  // Reads a whole data file at its real path (not under the system root).
  virtual int read_data_file(const std::string& path, std::string* contents) = 0;
  // flock(2): an advisory lock on the open file description of `fd`.
  virtual int flock(int fd, int operation) = 0;
  // fcntl(2) with a record-lock command (F_OFD_SETLK, F_OFD_GETLK, ...) on `lock`.
  virtual int fcntl_lock(int fd, int command, struct flock* lock) = 0;
  virtual int mount(const std::string& source, const std::string& target,
                    const std::string& fstype, unsigned long flags, const std::string& data) = 0;
  virtual int umount(const std::string& target) = 0;

  // Memory.
  virtual int mmap(size_t length, int prot, int flags, int fd, off_t offset, void** out) = 0;
  virtual int munmap(void* addr, size_t length) = 0;
  virtual int madvise(void* addr, size_t length, int advice) = 0;
  // mbind(2): `nodemask` has `maxnode` bits.
  virtual int mbind(void* addr, size_t length, int mode, const unsigned long* nodemask,
                    unsigned long maxnode, unsigned flags) = 0;
  // For each address in `pages`, the NUMA node of the page behind it, or -errno for that page
  // (move_pages(2) in query mode). The call itself returns 0 or -errno.
  virtual int query_page_nodes(size_t count, void* const* pages, int* nodes) = 0;

  // Threads: pin the calling thread to `cpus` (an empty list is a no-op).
  virtual int set_thread_cpus(const std::vector<int>& cpus) = 0;
  // Threads: how late the kernel may wake the calling thread's timed sleeps, so that it can
  // batch wake-ups (prctl(PR_SET_TIMERSLACK); the default is 50 us, too coarse for a thread that
  // polls every few tens of microseconds). Returns 0 or -errno.
  virtual int set_timer_slack_ns(uint64_t ns) = 0;

  // Processes: kill(2). Signal 0 only checks that `pid` exists (-ESRCH when it does not, -EPERM
  // when it exists but belongs to another user).
  virtual int send_signal(pid_t pid, int signal) = 0;
  // pidfd_open(2), flags 0: a close-on-exec descriptor that names exactly the process `pid` (a
  // reused pid cannot fool it) and turns readable once that process has exited. -ESRCH when it
  // is gone; -ENOSYS (an old kernel) or -EPERM (a seccomp filter) where pidfds are missing.
  virtual int pidfd_open(pid_t pid) = 0;

  // Clocks, in nanoseconds; they cannot fail. monotonic_ns: CLOCK_MONOTONIC, the clock of every
  // timeout, heartbeat and Report::time_ns, comparable between processes of one boot.
  // realtime_ns: CLOCK_REALTIME, the wall clock, for creation times shown to people.
  virtual int64_t monotonic_ns() = 0;
  virtual int64_t realtime_ns() = 0;

  // Futexes on 32-bit words in memory that several processes share (no FUTEX_PRIVATE_FLAG).
  // futex_wait sleeps while *word == expected, at most timeout_ns (negative: no limit), its timer
  // allowed to fire up to slack_ns after that (0: the thread's own timer slack; base/timer_slack.h
  // says what a wider one saves). Returns 0 when woken (possibly spuriously: callers re-check their
  // condition), -EAGAIN when *word was not `expected`, -ETIMEDOUT, or -EINTR.
  virtual int futex_wait(const std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns,
                         int64_t slack_ns) = 0;
  // Wakes up to `count` waiters on `word`; returns how many it woke.
  virtual int futex_wake(const std::atomic<uint32_t>* word, int count) = 0;
  // membarrier(2) with `command` (MEMBARRIER_CMD_*), flags 0. Returns 0 or -errno (-ENOSYS,
  // -EINVAL on kernels without the command, -EPERM under a seccomp filter).
  virtual int membarrier(int command) = 0;

  // Unix sockets (hugepind's request socket, the systemd notify socket). Every descriptor is
  // close-on-exec.
  // A non-blocking stream socket bound to `path` and listening; returns the descriptor. The
  // socket file's mode follows the umask: callers set it (chmod) before anyone may connect.
  virtual int listen_unix(const std::string& path, int backlog) = 0;
  // A blocking stream socket connected to `path`; returns the descriptor.
  virtual int connect_unix(const std::string& path) = 0;
  // Accepts one waiting connection (non-blocking) and reads its peer's credentials; returns the
  // descriptor, -EAGAIN when none waits.
  virtual int accept_unix(int listen_fd, PeerCredentials* peer) = 0;
  // read(2) and write(2) on any descriptor: the bytes moved (0 from read: end of stream).
  virtual ssize_t read(int fd, void* data, size_t bytes) = 0;
  virtual ssize_t write(int fd, const void* data, size_t bytes) = 0;
  // send(2) on a connected socket without SIGPIPE: a peer gone is -EPIPE.
  virtual ssize_t send(int fd, const void* data, size_t bytes) = 0;
  // Sends `message` as one datagram to the Unix socket `address`: a path, or '@' and an abstract
  // name (sd_notify's NOTIFY_SOCKET). Never waits: -EAGAIN when the receiver's queue is full.
  virtual int send_datagram(const std::string& address, std::string_view message) = 0;
  // poll(2): how many entries have events; 0 when `timeout_ms` (negative: none) passed; -EINTR.
  virtual int poll(struct pollfd* fds, size_t count, int timeout_ms) = 0;
  // Blocks `signals` for the calling thread (threads it starts later inherit the mask) and
  // returns a non-blocking signalfd(2) that delivers them as struct signalfd_siginfo records.
  virtual int signal_fd(const sigset_t& signals) = 0;
  // A non-blocking eventfd(2) starting at 0: write 8 bytes to add, read 8 bytes to take all.
  virtual int event_fd() = 0;
  // chmod(2) and chown(2) of a path (a socket file has no descriptor to fchmod).
  virtual int chmod(const std::string& path, mode_t mode) = 0;
  virtual int chown(const std::string& path, uid_t uid, gid_t gid) = 0;
};

static_assert(sizeof(std::atomic<uint32_t>) == 4 && std::atomic<uint32_t>::is_always_lock_free,
              "a futex word is a plain 32-bit word");

// The process's real kernel, system root "/". Lives for the whole process.
Os& real_os();

// A real kernel whose /sys and /proc reads and writes go under `system_root` instead: a recorded
// tree for tests. Everything else is the real system call.
std::unique_ptr<Os> make_rooted_os(std::string system_root);

// Reads a kernel file and parses it as one unsigned decimal number (surrounding white space
// allowed). Throws Error naming the file and its content when it is missing or malformed.
uint64_t read_kernel_u64(Os& os, const std::string& path);

// Reads a kernel file; throws Error naming the file when it cannot.
std::string read_kernel_text(Os& os, const std::string& path);

// Seconds on `os`'s monotonic clock since `start_ns`, an earlier os.monotonic_ns().
double seconds_since(Os& os, int64_t start_ns);

}  // namespace hugepin
