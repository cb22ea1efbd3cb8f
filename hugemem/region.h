// A rank region: one backing file, mapped shared, bound to its NUMA node before first touch,
// prefaulted by parallel threads, and checked for where its pages landed.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/os.h"
#include "base/trusted_file.h"

namespace hugepin {

// Where a region's pages are, as the kernel reports them (not as they were asked for).
struct Placement {
  uint64_t page_size = 0;
  uint64_t pages_total = 0;    // pages in the region
  uint64_t pages_checked = 0;  // pages asked about (all of them, or a sample for 4 KiB pages)
  // Pages found on each node; key -1 counts pages that are not resident or could not be located.
  std::map<int, uint64_t> pages_per_node;

  // The node holding most checked pages, or -1 when none is resident.
  int majority_node() const;
  // True when every checked page is on `node`.
  bool all_on(int node) const;
  // "node 0: 100%" or "node 0: 75%, node 1: 25%": for tables and messages.
  std::string describe() const;
};

// A mapping of a whole region file. Owns the mapping and the descriptor: move-only.
class MappedRegion {
 public:
  MappedRegion() = default;
  // Maps the region file at `where` (MAP_SHARED, its whole size), opened as base/trusted_file.h
  // says for a file hugepin writes: no link followed on the way, regular, a trusted owner, not
  // writable by others. Throws Error naming the path (kRefusedErrno for a refused file).
  static MappedRegion open(Os& os, const TrustedPath& where, bool writable);
  // The same for a path given whole: only its last component is checked (tests, tools).
  static MappedRegion open(Os& os, const std::string& path, bool writable);
  // Maps `file`, opened by open_trusted (with O_RDWR when `writable`), for the region at `path`.
  static MappedRegion map(Os& os, std::string path, TrustedFile file, bool writable);
  // Adopts a mapping and descriptor made by the caller.
  MappedRegion(Os& os, std::string path, int fd, void* data, uint64_t size, uint64_t page_size);
  ~MappedRegion();
  MappedRegion(MappedRegion&& other) noexcept;
  MappedRegion& operator=(MappedRegion&& other) noexcept;
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;

  std::byte* data() const { return static_cast<std::byte*>(data_); }
  uint64_t size() const { return size_; }
  uint64_t page_size() const { return page_size_; }
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  bool mapped() const { return data_ != nullptr; }

 private:
  void reset();

  Os* os_ = nullptr;
  std::string path_;
  int fd_ = -1;
  void* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t page_size_ = 0;
};

// The page size of the file system holding descriptor `fd` (hugetlbfs reports its page size as
// the block size). Throws Error naming `path`.
uint64_t file_page_size(Os& os, int fd, const std::string& path);

// Binds [addr, addr + length) to `node` before its first touch: MPOL_BIND when `strict` (a fault
// that node cannot serve fails), MPOL_PREFERRED otherwise. A negative node is a no-op.
// Returns false when the kernel has no NUMA support (nothing to bind); throws Error otherwise.
bool bind_to_node(Os& os, void* addr, uint64_t length, int node, bool strict);

// How pages are faulted in.
enum class PrefaultMethod {
  // MADV_POPULATE_WRITE: a page the pool cannot give is an error, never a SIGBUS. Its cost grows
  // with threads on hugetlbfs (16 GiB of 2 MiB pages on the H200 host: 0.85 s with 4 threads,
  // 2.2 s with 16).
  kPopulate,
  // One write per page: scales with threads (0.34 s with 16 threads there). Safe only where every
  // fault is sure to succeed: a shared hugetlbfs mapping, whose pages the kernel reserved at
  // mmap, under a preferred (not bound) node policy.
  kTouch,
};

struct PrefaultStats {
  unsigned threads = 0;
  PrefaultMethod method = PrefaultMethod::kPopulate;  // what was used (kTouch on kernels < 5.14)
};

// Faults in every page of [addr, addr + length) from `threads` threads, each on its own
// page-aligned range and pinned to `cpus` when given. Throws Error naming the range that failed.
PrefaultStats prefault(Os& os, void* addr, uint64_t length, uint64_t page_size, unsigned threads,
                       const std::vector<int>& cpus, PrefaultMethod method = PrefaultMethod::kPopulate);

// Where the pages of [addr, addr + length) are: every page when there are at most `max_samples`,
// an even sample of `max_samples` otherwise.
Placement verify_placement(Os& os, void* addr, uint64_t length, uint64_t page_size,
                           uint64_t max_samples = 16384);

}  // namespace hugepin
