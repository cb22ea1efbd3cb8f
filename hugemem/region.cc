#include "hugemem/region.h"

#include <fcntl.h>
#include <numaif.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "base/error.h"
#include "base/parallel.h"
#include "base/size.h"
#include "hugemem/naming.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

namespace hugepin {

int Placement::majority_node() const {
  int best = -1;
  uint64_t best_count = 0;
  for (auto [node, count] : pages_per_node) {
    if (node >= 0 && count > best_count) {
      best = node;
      best_count = count;
    }
  }
  return best;
}

bool Placement::all_on(int node) const {
  auto it = pages_per_node.find(node);
  return pages_checked > 0 && it != pages_per_node.end() && it->second == pages_checked;
}

std::string Placement::describe() const {
  if (pages_checked == 0) return "unknown";
  std::string text;
  for (auto [node, count] : pages_per_node) {
    char share[32];
    std::snprintf(share, sizeof share, "%.0f%%", 100.0 * static_cast<double>(count) /
                                                     static_cast<double>(pages_checked));
    text += cat(text.empty() ? "" : ", ", node < 0 ? std::string("absent") : cat("node ", node),
                ": ", share);
  }
  return text;
}

MappedRegion::MappedRegion(Os& os, std::string path, int fd, void* data, uint64_t size,
                           uint64_t page_size)
    : os_(&os), path_(std::move(path)), fd_(fd), data_(data), size_(size), page_size_(page_size) {}

MappedRegion MappedRegion::open(Os& os, const TrustedPath& where, bool writable) {
  TrustedFile file = open_trusted(os, where, writable ? O_RDWR : O_RDONLY, kRegionFileRule);
  return map(os, where.full(), std::move(file), writable);
}

MappedRegion MappedRegion::open(Os& os, const std::string& path, bool writable) {
  return open(os, user_named(path), writable);
}

MappedRegion MappedRegion::map(Os& os, std::string path, TrustedFile file, bool writable) {
  const uint64_t page_size = file_page_size(os, file.fd.get(), path);
  const auto size = static_cast<uint64_t>(file.status.st_size);
  if (size == 0) throw Error(cat("region file ", path, " is empty"));
  void* data = nullptr;
  const int prot = PROT_READ | (writable ? PROT_WRITE : 0);
  if (int rc = os.mmap(size, prot, MAP_SHARED, file.fd.get(), 0, &data); rc < 0) {
    throw_errno(cat("cannot map region file ", path, " (", format_bytes(size), ")"), -rc);
  }
  return MappedRegion(os, std::move(path), file.fd.release(), data, size, page_size);
}

MappedRegion::~MappedRegion() { reset(); }

MappedRegion::MappedRegion(MappedRegion&& other) noexcept { *this = std::move(other); }

MappedRegion& MappedRegion::operator=(MappedRegion&& other) noexcept {
  if (this != &other) {
    reset();
    os_ = other.os_;
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    page_size_ = other.page_size_;
  }
  return *this;
}

void MappedRegion::reset() {
  if (data_ != nullptr) os_->munmap(data_, size_);
  if (fd_ >= 0) os_->close(fd_);
  data_ = nullptr;
  fd_ = -1;
  size_ = 0;
}

uint64_t file_page_size(Os& os, int fd, const std::string& path) {
  struct statfs st {};
  if (int rc = os.fstatfs(fd, &st); rc < 0) throw_errno(cat("cannot statfs ", path), -rc);
  // hugetlbfs reports its page size as the block size; tmpfs and others report 4 KiB.
  return st.f_bsize > 0 ? static_cast<uint64_t>(st.f_bsize) : 4096;
}

bool bind_to_node(Os& os, void* addr, uint64_t length, int node, bool strict) {
  if (node < 0) return true;
  constexpr unsigned long kMaskBits = 1024;
  if (node >= static_cast<int>(kMaskBits)) throw Error(cat("NUMA node ", node, " is out of range"));
  unsigned long mask[kMaskBits / (8 * sizeof(unsigned long))] = {};
  mask[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
  int rc = os.mbind(addr, length, strict ? MPOL_BIND : MPOL_PREFERRED, mask, kMaskBits, 0);
  if (rc == -ENOSYS) return false;
  if (rc < 0) throw_errno(cat("cannot bind ", format_bytes(length), " to NUMA node ", node), -rc);
  return true;
}

namespace {

void touch_pages(std::byte* first, uint64_t length, uint64_t page_size) {
  for (uint64_t offset = 0; offset < length; offset += page_size) {
    *reinterpret_cast<volatile std::byte*>(first + offset) = std::byte{0};
  }
}

// Prefaults one range; returns 0, or -errno of the failed populate.
int prefault_range(Os& os, std::byte* first, uint64_t length, uint64_t page_size, PrefaultMethod* method) {
  if (*method == PrefaultMethod::kTouch) {
    touch_pages(first, length, page_size);
    return 0;
  }
  int rc = os.madvise(first, length, MADV_POPULATE_WRITE);
  if (rc == -EINVAL) {
    // Kernels before 5.14 lack MADV_POPULATE_WRITE: touch instead (callers checked the pool).
    touch_pages(first, length, page_size);
    *method = PrefaultMethod::kTouch;
    return 0;
  }
  return rc;
}

}  // namespace

PrefaultStats prefault(Os& os, void* addr, uint64_t length, uint64_t page_size, unsigned threads,
                       const std::vector<int>& cpus, PrefaultMethod method) {
  uint64_t pages = length / page_size;
  threads = static_cast<unsigned>(std::clamp<uint64_t>(threads, 1, std::max<uint64_t>(pages, 1)));
  PrefaultStats stats{threads, method};
  std::vector<int> errors(threads, 0);
  std::vector<PrefaultMethod> used(threads, method);
  auto* base = static_cast<std::byte*>(addr);
  auto fault_share = [&](unsigned t) {
    const Share share = share_of(pages, t, threads);
    errors[t] = prefault_range(os, base + share.first * page_size, (share.last - share.first) * page_size, page_size,
                               &used[t]);
  };
  // Best effort: placement comes from the policy, not the CPU.
  run_on_threads(threads, fault_share, [&] { os.set_thread_cpus(cpus); });
  for (unsigned t = 0; t < threads; ++t) {
    if (used[t] == PrefaultMethod::kTouch) stats.method = PrefaultMethod::kTouch;
    if (errors[t] == 0) continue;
    const uint64_t first_page = share_of(pages, t, threads).first;
    const uint64_t count = share_of(pages, t, threads).last - first_page;
    std::string why = errors[t] == -ENOMEM || errors[t] == -EFAULT
                          ? " (the pool ran out of pages while faulting)"
                          : "";
    throw_errno(cat("cannot fault in ", count, " pages of ", page_size_name(page_size),
                    " at page ", first_page, why),
                -errors[t]);
  }
  return stats;
}

Placement verify_placement(Os& os, void* addr, uint64_t length, uint64_t page_size,
                           uint64_t max_samples) {
  Placement placement;
  placement.page_size = page_size;
  placement.pages_total = length / page_size;
  uint64_t samples = std::min(placement.pages_total, std::max<uint64_t>(max_samples, 1));
  if (samples == 0) return placement;
  std::vector<void*> pages(samples);
  std::vector<int> nodes(samples, -1);
  auto* base = static_cast<std::byte*>(addr);
  for (uint64_t i = 0; i < samples; ++i) {
    uint64_t page = placement.pages_total * i / samples;
    pages[i] = base + page * page_size;
  }
  if (int rc = os.query_page_nodes(samples, pages.data(), nodes.data()); rc < 0) {
    if (rc != -ENOSYS) throw_errno("cannot query the NUMA node of region pages", -rc);
    // No NUMA support: every page is on the one node there is.
    std::fill(nodes.begin(), nodes.end(), 0);
  }
  placement.pages_checked = samples;
  for (int node : nodes) ++placement.pages_per_node[node < 0 ? -1 : node];
  return placement;
}

}  // namespace hugepin
