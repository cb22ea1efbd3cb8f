#include "ipc/process_watch.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "base/error.h"

namespace hugepin {

namespace {

// pidfd_open(2) as a raw system call: returns the descriptor or -errno.
int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  long fd = syscall(SYS_pidfd_open, pid, 0);
  return fd >= 0 ? static_cast<int>(fd) : -errno;
#else
  (void)pid;
  return -ENOSYS;
#endif
}

}  // namespace

ProcessWatch::ProcessWatch(Method method) : method_(method) {}

ProcessWatch::~ProcessWatch() { close_all(); }

ProcessWatch::ProcessWatch(ProcessWatch&& other) noexcept
    : method_(other.method_), uses_pidfd_(other.uses_pidfd_), watched_(std::move(other.watched_)) {
  other.watched_.clear();
}

ProcessWatch& ProcessWatch::operator=(ProcessWatch&& other) noexcept {
  if (this != &other) {
    close_all();
    method_ = other.method_;
    uses_pidfd_ = other.uses_pidfd_;
    watched_ = std::move(other.watched_);
    other.watched_.clear();
  }
  return *this;
}

void ProcessWatch::close_all() {
  for (auto& [rank, watched] : watched_) {
    if (watched.pidfd >= 0) ::close(watched.pidfd);
  }
  watched_.clear();
}

void ProcessWatch::watch(uint32_t rank, pid_t pid) {
  if (pid <= 0) throw Error(cat("rank ", rank, ": pid ", pid, " is not a process id"));
  Watched watched;
  watched.pid = pid;
  if (method_ == Method::kAuto) {
    int fd = open_pidfd(pid);
    if (fd >= 0) {
      watched.pidfd = fd;
    } else if (fd == -ESRCH) {
      watched.gone = true;
    } else if (fd == -ENOSYS || fd == -EPERM) {
      uses_pidfd_ = false;  // no pidfds here: probe with kill(pid, 0)
    } else {
      throw_errno(cat("pidfd_open of pid ", pid, " (rank ", rank, ")"), -fd);
    }
  } else {
    uses_pidfd_ = false;
  }
  forget(rank);
  watched_[rank] = watched;
}

void ProcessWatch::forget(uint32_t rank) {
  auto it = watched_.find(rank);
  if (it == watched_.end()) return;
  if (it->second.pidfd >= 0) ::close(it->second.pidfd);
  watched_.erase(it);
}

bool ProcessWatch::is_gone(const Watched& watched) const {
  if (watched.gone) return true;
  if (watched.pidfd >= 0) {
    pollfd entry{watched.pidfd, POLLIN, 0};
    return ::poll(&entry, 1, 0) > 0 && (entry.revents & (POLLIN | POLLHUP)) != 0;
  }
  return ::kill(watched.pid, 0) != 0 && errno == ESRCH;
}

void ProcessWatch::poll(std::vector<uint32_t>* gone) {
  for (auto it = watched_.begin(); it != watched_.end();) {
    if (is_gone(it->second)) {
      gone->push_back(it->first);
      if (it->second.pidfd >= 0) ::close(it->second.pidfd);
      it = watched_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace hugepin
