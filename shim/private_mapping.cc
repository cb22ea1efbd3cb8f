#include "shim/private_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <map>
#include <thread>

#include "base/log.h"
#include "base/size.h"
#include "base/trusted_file.h"
#include "hugemem/mounts.h"
#include "hugemem/pool.h"
#include "hugemem/region.h"
#include "hugemem/topology.h"
#include "shim/fallback.h"

namespace hugepin {
namespace {

constexpr long kHugetlbfsMagic = 0x958458f6;
// MADV_POPULATE_WRITE gets slower with more threads on hugetlbfs (BENCH.md: 0.85 s for 16 GiB
// with 4 threads, 2.2 s with 16); 4 is the measured best.
constexpr unsigned kPrefaultThreads = 4;

std::atomic<uint64_t> g_sequence{0};

// What the pool offers for a mapping placed on `node` (-1: anywhere).
// `mounts` receives the mount directory of each offered size that has one.
std::vector<PageSizeOffer> read_offers(Os& os, const ShimConfig& config, int node,
                                       std::map<uint64_t, std::string>* mounts) {
  PoolState pool = read_pool(os);
  uint64_t configured = config.hugetlbfs_dir.empty() ? 0 : hugetlbfs_page_size(os, config.hugetlbfs_dir);
  std::vector<PageSizeOffer> offers;
  for (uint64_t page_size : pool.page_sizes) {
    PageSizeOffer offer;
    offer.page_size = page_size;
    offer.free_pages = pool.available(node, page_size);
    std::string dir;
    if (!config.hugetlbfs_dir.empty()) {
      if (configured == page_size) dir = config.hugetlbfs_dir;
    } else if (auto mount = find_hugetlbfs_mount(pool.mounts, page_size)) {
      dir = mount->dir;
    }
    offer.mounted = !dir.empty();
    if (offer.mounted) (*mounts)[page_size] = dir;
    offers.push_back(offer);
  }
  return offers;
}

// An open, already unlinked hugetlbfs file in `dir`: nothing stays on disk whatever happens next.
// Made with O_CREAT | O_EXCL through open_trusted: a link planted at the name is never followed.
int open_unlinked_file(Os& os, const std::string& dir) {
  constexpr FileRule kMappingRule{FileType::kRegular, FileOwners::kTrusted, "shim mapping"};
  const std::string name = cat("hugepin-shim.", getpid(), ".", g_sequence.fetch_add(1));
  TrustedFile file;
  try {
    file = open_trusted(os, {dir, name}, O_RDWR | O_CREAT | O_EXCL, kMappingRule, 0600);
  } catch (const Error& error) {
    const int code = error.errno_value();
    throw Fallback(cat("open:", dir), cat("cannot create a file in the hugetlbfs mount ", dir, ": ",
                                          code == kRefusedErrno ? std::string(error.what()) : errno_text(code)));
  }
  os.unlink(cat(dir, "/", name));
  return file.fd.release();
}

std::vector<int> node_cpus(Os& os, int node) {
  if (node < 0) return {};
  try {
    Topology topology = read_topology(os);
    const NumaNode* numa = topology.find(node);
    return numa != nullptr ? numa->cpus : std::vector<int>{};
  } catch (const Error&) {
    return {};
  }
}

// Binds, prefaults and checks a fresh mapping; throws Fallback (the caller unmaps).
void place(Os& os, PrivateMapping& mapping, int gpu_node, bool strict) {
  try {
    if (!bind_to_node(os, mapping.data, mapping.bytes, gpu_node, strict)) {
      log::warn_once("no-numa", "the kernel has no NUMA support: shim mappings are not bound to nodes");
    }
  } catch (const Error& error) {
    throw Fallback("mbind", error.what());
  }
  try {
    unsigned threads = std::min(kPrefaultThreads, std::max(1u, std::thread::hardware_concurrency()));
    prefault(os, mapping.data, mapping.bytes, mapping.page_size, threads, node_cpus(os, gpu_node),
             PrefaultMethod::kPopulate);
  } catch (const Error& error) {
    throw Fallback("prefault", error.what());
  }
  Placement placement = verify_placement(os, mapping.data, mapping.bytes, mapping.page_size, 1024);
  mapping.node = placement.majority_node();
  mapping.all_on_node = mapping.node >= 0 && placement.all_on(mapping.node);
  if (gpu_node >= 0 && !placement.all_on(gpu_node)) {
    std::string message = cat("the GPU is on node ", gpu_node, ", a shim mapping's pages are on ", placement.describe());
    if (strict) throw Fallback("placement", cat("strict: ", message));
    log::warn_once("placement", message);
  }
}

// The page size of the hugetlbfs file system holding `fd`; 0 for any other file system.
uint64_t file_hugetlbfs_page_size(Os& os, int fd) {
  struct statfs st {};
  if (os.fstatfs(fd, &st) < 0 || static_cast<long>(st.f_type) != kHugetlbfsMagic) return 0;
  return static_cast<uint64_t>(st.f_bsize);
}

}  // namespace

uint64_t hugetlbfs_page_size(Os& os, const std::string& dir) {
  int fd = os.open(dir, O_RDONLY | O_DIRECTORY, 0);
  if (fd < 0) return 0;
  uint64_t page_size = file_hugetlbfs_page_size(os, fd);
  os.close(fd);
  return page_size;
}

PrivateMapping map_private(Os& os, uint64_t bytes, int gpu_node, const ShimConfig& config) {
  std::map<uint64_t, std::string> mounts;
  std::vector<PageSizeOffer> offers;
  try {
    offers = read_offers(os, config, config.strict ? gpu_node : -1, &mounts);
  } catch (const Error& error) {
    throw Fallback("pool", cat("cannot read the hugepage pool: ", error.what()));
  }
  if (!config.hugetlbfs_dir.empty() && mounts.empty()) {
    throw Fallback("hugetlbfs-dir", cat("HUGEPIN_HUGETLBFS_DIR=", config.hugetlbfs_dir,
                                        " is not a hugetlbfs mount of a size the pool has"));
  }
  std::string why;
  std::optional<uint64_t> page_size = choose_page_size(bytes, config.page_size, offers, &why);
  if (!page_size) throw Fallback(cat("pool:", config.page_size), cat("no hugepages for ", format_bytes(bytes), ": ", why));

  PrivateMapping mapping;
  mapping.page_size = *page_size;
  mapping.bytes = *round_up(bytes, *page_size);
  const std::string& dir = mounts.at(*page_size);
  int fd = open_unlinked_file(os, dir);
  // A mount listed in /proc/mounts may be gone, or hide under another file system now.
  if (uint64_t found = file_hugetlbfs_page_size(os, fd); found != *page_size) {
    os.close(fd);
    throw Fallback(cat("not-hugetlbfs:", dir), cat(dir, " is not a hugetlbfs mount of ", page_size_name(*page_size),
                                                   " pages", found != 0 ? cat(" (its pages are ", page_size_name(found), ")") : ""));
  }
  int rc = os.ftruncate(fd, mapping.bytes);
  if (rc == 0) rc = os.mmap(mapping.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0, &mapping.data);
  os.close(fd);  // the mapping keeps the file
  if (rc < 0) {
    throw Fallback(cat("map:", page_size_name(*page_size)),
                   cat("cannot map ", mapping.bytes / *page_size, " pages of ", page_size_name(*page_size), " in ", dir,
                       ": ", errno_text(-rc), rc == -ENOMEM ? " (the pool is short: hugepin pool set)" : ""));
  }
  try {
    place(os, mapping, gpu_node, config.strict);
  } catch (...) {
    unmap_private(os, mapping);
    throw;
  }
  return mapping;
}

void unmap_private(Os& os, const PrivateMapping& mapping) { os.munmap(mapping.data, mapping.bytes); }

}  // namespace hugepin
