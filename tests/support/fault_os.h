// Os wrappers for tests: ForwardingOs passes every call to another Os (override what you fake),
// FaultInjectionOs fails a chosen call with a chosen errno (leveldb's ErrorEnv).
// ManualClockOs plays clocks the test moves.
#pragma once

#include <fcntl.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <mutex>
#include <string>

#include "base/os.h"

namespace hugepin::test {

class ForwardingOs : public Os {
 public:
  explicit ForwardingOs(Os& target) : target_(target) {}

  int read_file(const std::string& path, std::string* contents) override { return target_.read_file(path, contents); }
  int write_file(const std::string& path, std::string_view contents) override { return target_.write_file(path, contents); }
  int list_dir(const std::string& path, std::vector<std::string>* names) override { return target_.list_dir(path, names); }
  const std::string& system_root() const override { return target_.system_root(); }
  int open(const std::string& path, int flags, mode_t mode) override { return target_.open(path, flags, mode); }
  int close(int fd) override { return target_.close(fd); }
  int ftruncate(int fd, uint64_t size) override { return target_.ftruncate(fd, size); }
  int fstat(int fd, struct stat* out) override { return target_.fstat(fd, out); }
  int fstatfs(int fd, struct statfs* out) override { return target_.fstatfs(fd, out); }
  int fchmod(int fd, mode_t mode) override { return target_.fchmod(fd, mode); }
  int fchown(int fd, uid_t uid, gid_t gid) override { return target_.fchown(fd, uid, gid); }
  int unlink(const std::string& path) override { return target_.unlink(path); }
  int mkdir(const std::string& path, mode_t mode) override { return target_.mkdir(path, mode); }
  int rmdir(const std::string& path) override { return target_.rmdir(path); }
  int list_data_dir(const std::string& path, std::vector<std::string>* names) override {
    return target_.list_data_dir(path, names);
  }
  int openat(int dir_fd, const std::string& name, int flags, mode_t mode) override {
    return target_.openat(dir_fd, name, flags, mode);
  }
  int mkdirat(int dir_fd, const std::string& name, mode_t mode) override { return target_.mkdirat(dir_fd, name, mode); }
  int unlinkat(int dir_fd, const std::string& name, int flags) override { return target_.unlinkat(dir_fd, name, flags); }
  int list_dir_at(int dir_fd, std::vector<std::string>* names) override { return target_.list_dir_at(dir_fd, names); }
  int set_blocking(int fd) override { return target_.set_blocking(fd); }
  ssize_t pread(int fd, void* data, size_t bytes, uint64_t offset) override {
    return target_.pread(fd, data, bytes, offset);
  }
  ssize_t pwrite(int fd, const void* data, size_t bytes, uint64_t offset) override {
    return target_.pwrite(fd, data, bytes, offset);
  }
  int fsync(int fd) override { return target_.fsync(fd); }
  int fdatasync(int fd) override { return target_.fdatasync(fd); }
  int fallocate(int fd, uint64_t offset, uint64_t length) override { return target_.fallocate(fd, offset, length); }
  int fadvise(int fd, uint64_t offset, uint64_t length, int advice) override {
    return target_.fadvise(fd, offset, length, advice);
  }
  int fstatx(int fd, unsigned mask, struct statx* out) override { return target_.fstatx(fd, mask, out); }
  int rename(const std::string& from, const std::string& to) override { return target_.rename(from, to); }
  int read_data_file(const std::string& path, std::string* contents) override {
    return target_.read_data_file(path, contents);
  }
  int flock(int fd, int operation) override { return target_.flock(fd, operation); }
  int fcntl_lock(int fd, int command, struct flock* lock) override { return target_.fcntl_lock(fd, command, lock); }
  int mount(const std::string& source, const std::string& target, const std::string& fstype, unsigned long flags,
            const std::string& data) override {
    return target_.mount(source, target, fstype, flags, data);
  }
  int umount(const std::string& target) override { return target_.umount(target); }
  int mmap(size_t length, int prot, int flags, int fd, off_t offset, void** out) override {
    return target_.mmap(length, prot, flags, fd, offset, out);
  }
  int munmap(void* addr, size_t length) override { return target_.munmap(addr, length); }
  int madvise(void* addr, size_t length, int advice) override { return target_.madvise(addr, length, advice); }
  int mbind(void* addr, size_t length, int mode, const unsigned long* nodemask, unsigned long maxnode,
            unsigned flags) override {
    return target_.mbind(addr, length, mode, nodemask, maxnode, flags);
  }
  int query_page_nodes(size_t count, void* const* pages, int* nodes) override {
    return target_.query_page_nodes(count, pages, nodes);
  }
  int set_thread_cpus(const std::vector<int>& cpus) override { return target_.set_thread_cpus(cpus); }
  int set_timer_slack_ns(uint64_t ns) override { return target_.set_timer_slack_ns(ns); }
  int send_signal(pid_t pid, int signal) override { return target_.send_signal(pid, signal); }
  int pidfd_open(pid_t pid) override { return target_.pidfd_open(pid); }
  int64_t monotonic_ns() override { return target_.monotonic_ns(); }
  int64_t realtime_ns() override { return target_.realtime_ns(); }
  int futex_wait(const std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns, int64_t slack_ns) override {
    return target_.futex_wait(word, expected, timeout_ns, slack_ns);
  }
  int futex_wake(const std::atomic<uint32_t>* word, int count) override { return target_.futex_wake(word, count); }
  int membarrier(int command) override { return target_.membarrier(command); }
  int listen_unix(const std::string& path, int backlog) override { return target_.listen_unix(path, backlog); }
  int connect_unix(const std::string& path) override { return target_.connect_unix(path); }
  int accept_unix(int listen_fd, PeerCredentials* peer) override { return target_.accept_unix(listen_fd, peer); }
  ssize_t read(int fd, void* data, size_t bytes) override { return target_.read(fd, data, bytes); }
  ssize_t write(int fd, const void* data, size_t bytes) override { return target_.write(fd, data, bytes); }
  ssize_t send(int fd, const void* data, size_t bytes) override { return target_.send(fd, data, bytes); }
  int send_datagram(const std::string& address, std::string_view message) override {
    return target_.send_datagram(address, message);
  }
  int poll(struct pollfd* fds, size_t count, int timeout_ms) override { return target_.poll(fds, count, timeout_ms); }
  int signal_fd(const sigset_t& signals) override { return target_.signal_fd(signals); }
  int event_fd() override { return target_.event_fd(); }
  int chmod(const std::string& path, mode_t mode) override { return target_.chmod(path, mode); }
  int chown(const std::string& path, uid_t uid, gid_t gid) override { return target_.chown(path, uid, gid); }

 protected:
  Os& target_;
};

// A kernel whose clocks stand still until the test moves them: timeouts, backoffs and ages
// without waiting for them. Everything else is forwarded.
class ManualClockOs : public ForwardingOs {
 public:
  using ForwardingOs::ForwardingOs;
  int64_t monotonic_ns() override { return monotonic_ns_.load(); }
  int64_t realtime_ns() override { return realtime_ns_.load(); }
  // Moves both clocks forward by `ns`.
  void advance(int64_t ns) {
    monotonic_ns_ += ns;
    realtime_ns_ += ns;
  }

 private:
  std::atomic<int64_t> monotonic_ns_{1'000'000'000};            // a second after boot
  std::atomic<int64_t> realtime_ns_{1'700'000'000'000'000'000};  // November 2023
};

// Fails the n-th next call of one operation. Operations are named after the Os methods.
class FaultInjectionOs : public ForwardingOs {
 public:
  using ForwardingOs::ForwardingOs;

  // The call of `op` after `skip` more successful ones returns -error_value (once).
  void fail(const std::string& op, int error_value, int skip = 0) {
    std::lock_guard lock(mutex_);
    faults_[op] = {error_value, skip};
  }
  // How many times `op` was called.
  int calls(const std::string& op) {
    std::lock_guard lock(mutex_);
    return calls_[op];
  }

  int open(const std::string& path, int flags, mode_t mode) override {
    return inject("open", [&] { return target_.open(path, flags, mode); });
  }
  // Named "create" when the call may create a file (O_CREAT), "openat" otherwise.
  int openat(int dir_fd, const std::string& name, int flags, mode_t mode) override {
    return inject((flags & O_CREAT) != 0 ? "create" : "openat", [&] { return target_.openat(dir_fd, name, flags, mode); });
  }
  int ftruncate(int fd, uint64_t size) override { return inject("ftruncate", [&] { return target_.ftruncate(fd, size); }); }
  int fchmod(int fd, mode_t mode) override { return inject("fchmod", [&] { return target_.fchmod(fd, mode); }); }
  int mkdir(const std::string& path, mode_t mode) override { return inject("mkdir", [&] { return target_.mkdir(path, mode); }); }
  int mmap(size_t length, int prot, int flags, int fd, off_t offset, void** out) override {
    return inject("mmap", [&] { return target_.mmap(length, prot, flags, fd, offset, out); });
  }
  int madvise(void* addr, size_t length, int advice) override {
    return inject("madvise", [&] { return target_.madvise(addr, length, advice); });
  }
  int mbind(void* addr, size_t length, int mode, const unsigned long* nodemask, unsigned long maxnode,
            unsigned flags) override {
    return inject("mbind", [&] { return target_.mbind(addr, length, mode, nodemask, maxnode, flags); });
  }
  int query_page_nodes(size_t count, void* const* pages, int* nodes) override {
    return inject("query_page_nodes", [&] { return target_.query_page_nodes(count, pages, nodes); });
  }
  int write_file(const std::string& path, std::string_view contents) override {
    return inject("write_file", [&] { return target_.write_file(path, contents); });
  }
  ssize_t pread(int fd, void* data, size_t bytes, uint64_t offset) override {
    return inject("pread", [&] { return target_.pread(fd, data, bytes, offset); });
  }
  ssize_t pwrite(int fd, const void* data, size_t bytes, uint64_t offset) override {
    return inject("pwrite", [&] { return target_.pwrite(fd, data, bytes, offset); });
  }
  int fsync(int fd) override { return inject("fsync", [&] { return target_.fsync(fd); }); }
  int fdatasync(int fd) override { return inject("fdatasync", [&] { return target_.fdatasync(fd); }); }
  int fallocate(int fd, uint64_t offset, uint64_t length) override {
    return inject("fallocate", [&] { return target_.fallocate(fd, offset, length); });
  }
  int rename(const std::string& from, const std::string& to) override {
    return inject("rename", [&] { return target_.rename(from, to); });
  }
  int accept_unix(int listen_fd, PeerCredentials* peer) override {
    return inject("accept_unix", [&] { return target_.accept_unix(listen_fd, peer); });
  }
  int send_datagram(const std::string& address, std::string_view message) override {
    return inject("send_datagram", [&] { return target_.send_datagram(address, message); });
  }
  int pidfd_open(pid_t pid) override { return inject("pidfd_open", [&] { return target_.pidfd_open(pid); }); }

 private:
  struct Fault {
    int error_value = 0;
    int skip = 0;
  };

  template <typename Call>
  auto inject(const std::string& op, Call call) -> decltype(call()) {
    {
      std::lock_guard lock(mutex_);
      ++calls_[op];
      auto it = faults_.find(op);
      if (it != faults_.end()) {
        if (it->second.skip-- == 0) {
          int error_value = it->second.error_value;
          faults_.erase(it);
          return -error_value;
        }
      }
    }
    return call();
  }

  std::mutex mutex_;
  std::map<std::string, Fault> faults_;
  std::map<std::string, int> calls_;
};

}  // namespace hugepin::test
