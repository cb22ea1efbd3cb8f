#include "ipc/process_watch.h"

#include <poll.h>

#include <cerrno>
#include <utility>

#include "base/error.h"

namespace hugepin {

ProcessWatch::ProcessWatch(Os& os, Method method) : os_(&os), method_(method) {}

ProcessWatch::~ProcessWatch() { close_all(); }

ProcessWatch::ProcessWatch(ProcessWatch&& other) noexcept
    : os_(other.os_), method_(other.method_), uses_pidfd_(other.uses_pidfd_), watched_(std::move(other.watched_)) {
  other.watched_.clear();
}

ProcessWatch& ProcessWatch::operator=(ProcessWatch&& other) noexcept {
  if (this != &other) {
    close_all();
    os_ = other.os_;
    method_ = other.method_;
    uses_pidfd_ = other.uses_pidfd_;
    watched_ = std::move(other.watched_);
    other.watched_.clear();
  }
  return *this;
}

void ProcessWatch::close_pidfd(const Watched& watched) {
  if (watched.pidfd >= 0) os_->close(watched.pidfd);
}

void ProcessWatch::close_all() {
  for (auto& [rank, watched] : watched_) close_pidfd(watched);
  watched_.clear();
}

void ProcessWatch::watch(uint32_t rank, pid_t pid) {
  if (pid <= 0) throw Error(cat("rank ", rank, ": pid ", pid, " is not a process id"));
  Watched watched;
  watched.pid = pid;
  if (method_ == Method::kAuto) {
    int fd = os_->pidfd_open(pid);
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
  close_pidfd(it->second);
  watched_.erase(it);
}

bool ProcessWatch::is_gone(const Watched& watched) const {
  if (watched.gone) return true;
  if (watched.pidfd >= 0) {
    pollfd entry{watched.pidfd, POLLIN, 0};
    return os_->poll(&entry, 1, 0) > 0 && (entry.revents & (POLLIN | POLLHUP)) != 0;
  }
  return os_->send_signal(watched.pid, 0) == -ESRCH;
}

void ProcessWatch::poll(std::vector<uint32_t>* gone) {
  for (auto it = watched_.begin(); it != watched_.end();) {
    if (is_gone(it->second)) {
      gone->push_back(it->first);
      close_pidfd(it->second);
      it = watched_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace hugepin
