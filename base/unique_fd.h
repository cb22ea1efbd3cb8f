// A file descriptor with one owner: closed through its Os when the owner goes away.
#pragma once

#include <utility>

#include "base/os.h"

namespace hugepin {

// Move-only. Thread-safety: none of its own (as for an int); the descriptor itself may be used
// from several threads (pread/pwrite, io_uring) while this object lives.
class UniqueFd {
 public:
  UniqueFd() = default;
  // Adopts `fd` (>= 0), which `os` opened.
  UniqueFd(Os& os, int fd) : os_(&os), fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : os_(other.os_), fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      reset();
      os_ = other.os_;
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

  // Gives the descriptor up without closing it: the caller owns it now.
  int release() { return std::exchange(fd_, -1); }

  // Closes now; returns 0 or -errno from close(2) (which can report a deferred write error).
  int close() {
    int rc = fd_ >= 0 ? os_->close(fd_) : 0;
    fd_ = -1;
    return rc;
  }

 private:
  void reset() { close(); }

  Os* os_ = nullptr;
  int fd_ = -1;
};

}  // namespace hugepin
