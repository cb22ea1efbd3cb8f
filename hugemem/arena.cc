#include "hugemem/arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "base/parallel.h"
#include "base/size.h"
#include "hugemem/naming.h"
#include "hugemem/topology.h"

namespace hugepin {
namespace {

// The largest region hugepin accepts: 16 TiB, far above any host, far below overflow.
constexpr uint64_t kMaxRegionBytes = 16 * kTiB;

// A region being created: what was chosen, and what must be undone if creation fails.
struct PendingRegion {
  RegionRequest request;
  BackingChoice backing;
  std::string dir;
  std::string path;
  bool file_created = false;
  MappedRegion mapping;
  RegionReport report;
};

void remove_created(Os& os, std::vector<PendingRegion>& pending) {
  std::set<std::string> dirs;
  for (PendingRegion& region : pending) {
    region.mapping = MappedRegion();
    if (region.file_created) os.unlink(region.path);
    dirs.insert(region.dir);
  }
  for (const std::string& dir : dirs) os.rmdir(dir);  // fails harmlessly when not empty
}

// 4 KiB regions live in a tmpfs (/dev/shm) that NCCL, PyTorch and others share: an arena that
// does not fit is refused before a byte is written, not discovered by filling it. (Hugepage
// regions need no such check: the pool reserves their pages at mmap, or the mmap fails.)
void check_shm_space(Os& os, const std::vector<PendingRegion>& pending) {
  std::map<std::string, uint64_t> needed;  // root -> bytes of 4 KiB regions
  for (const PendingRegion& region : pending) {
    // A region over the size limit is refused, with that reason, when it is made.
    if (region.backing.page_size != 4 * kKiB || region.request.bytes > kMaxRegionBytes) continue;
    const uint64_t bytes = round_up(region.request.bytes, 4 * kKiB).value_or(UINT64_MAX);
    uint64_t& total = needed[region.backing.root_dir];
    total = bytes > UINT64_MAX - total ? UINT64_MAX : total + bytes;
  }
  for (const auto& [root, bytes] : needed) {
    int fd = os.open(root, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0) continue;  // reported where the region is made
    struct statfs fs {};
    const int rc = os.fstatfs(fd, &fs);
    os.close(fd);
    if (rc < 0) continue;
    const uint64_t available = static_cast<uint64_t>(fs.f_bavail) * static_cast<uint64_t>(fs.f_bsize);
    if (bytes > available) {
      throw Error(cat("the arena's 4 KiB regions need ", format_bytes(bytes), " in ", root, ", which has ",
                      format_bytes(available), " free: reserve hugepages (hugepin pool set) or ask for less"),
                  ENOSPC);
    }
  }
}

// A group-shared arena's directory belongs to its group, or members could not reach its files.
void share_dir_with_group(Os& os, const TrustedFile& dir, const std::string& path, gid_t group) {
  int rc = os.fchown(dir.fd.get(), static_cast<uid_t>(-1), group);
  if (rc == 0) rc = os.fchmod(dir.fd.get(), 0770);
  if (rc < 0) throw_errno(cat("cannot give ", path, " to group ", group), -rc);
}

// Creates, sizes, maps and binds one region file (the "reserve" phase).
void reserve_region(Os& os, PendingRegion& region, std::string_view name, const ArenaOptions& options) {
  const int64_t start = os.monotonic_ns();
  const uint64_t page_size = region.backing.page_size;
  std::optional<uint64_t> bytes = round_up(region.request.bytes, page_size);
  if (!bytes || *bytes > kMaxRegionBytes) {
    throw Error(cat("rank ", region.request.rank, " asks for ", region.request.bytes,
                    " bytes: more than the ", format_bytes(kMaxRegionBytes), " a region may have"));
  }
  // Every directory on the way is opened without following links and checked (base/trusted_file.h):
  // under a directory others may write, a link planted in place of the arena's would take its files.
  const TrustedPath dir = arena_data_location(region.backing.root_dir, name);
  make_trusted_dir(os, {dir.base, std::string(kDataDirName)}, 0755, kArenaDirRule);
  // Directory and file are made private and opened to the group only once they belong to it:
  // made with group bits, they would be open to the creator's primary group in between.
  TrustedFile dir_file = make_trusted_dir(os, dir, 0700, kArenaDirRule);
  if (options.group) share_dir_with_group(os, dir_file, region.dir, *options.group);

  mode_t file_mode = options.group ? (options.mode | 0060) & 0660 : options.mode;
  TrustedFile file;
  try {
    file = open_trusted(os, dir.child(region_file_name(region.request.rank)), O_RDWR | O_CREAT | O_EXCL, kRegionFileRule,
                        file_mode & 0600);
  } catch (const Error& error) {
    if (error.errno_value() != EEXIST) throw;
    throw Error(cat("region file ", region.path, " already exists: remove the old arena first (hugepin arena destroy ",
                    name, ")"), EEXIST);
  }
  const int fd = file.fd.release();
  region.file_created = true;
  auto fail = [&](std::string_view what, int rc) {
    os.close(fd);
    throw_errno(cat(what, " ", region.path), -rc);
  };
  if (options.group) {
    if (int rc = os.fchown(fd, static_cast<uid_t>(-1), *options.group); rc < 0) fail("cannot set the group of", rc);
  }
  if (int rc = os.fchmod(fd, file_mode); rc < 0) fail("cannot set the mode of", rc);  // umask-proof
  if (int rc = os.ftruncate(fd, *bytes); rc < 0) fail(cat("cannot size to ", format_bytes(*bytes)), rc);
  void* data = nullptr;
  if (int rc = os.mmap(*bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0, &data); rc < 0) {
    std::string why = rc == -ENOMEM && page_size > 4 * kKiB
                          ? cat(" (the ", page_size_name(page_size), " pool cannot reserve ",
                                *bytes / page_size, " pages now)")
                          : "";
    fail(cat("cannot map ", format_bytes(*bytes), why, " of"), rc);
  }
  region.mapping = MappedRegion(os, region.path, fd, data, *bytes, page_size);
  if (!bind_to_node(os, data, *bytes, region.request.node, options.strict)) {
    log::warn_once("no-numa", "the kernel has no NUMA support: regions are not bound to nodes");
  }
  region.report.bytes = *bytes;
  region.report.reserve_seconds = seconds_since(os, start);
}

unsigned threads_for_node(const Topology& topology, int node, unsigned asked) {
  if (asked != 0) return asked;
  const NumaNode* numa = topology.find(node < 0 ? topology.nodes.front().id : node);
  unsigned cpus = numa != nullptr && !numa->cpus.empty() ? static_cast<unsigned>(numa->cpus.size())
                                                         : std::max(1u, std::thread::hardware_concurrency());
  return std::min(cpus, 16u);
}

// Prefaults and verifies one region (its mapping is bound already).
void populate_region(Os& os, PendingRegion& region, const Topology& topology, const ArenaOptions& options) {
  const int node = region.request.node;
  const NumaNode* numa = node >= 0 ? topology.find(node) : nullptr;
  std::vector<int> cpus = numa != nullptr ? numa->cpus : std::vector<int>{};
  int64_t start = os.monotonic_ns();
  // Touching is faster with many threads, and safe on hugetlbfs unless the region is bound to a
  // node: the kernel reserved every page at mmap, and a preferred node falls back. A bound region
  // is populated instead, which fails rather than raising SIGBUS.
  const bool bound = node >= 0 && options.strict;
  const bool reserved = region.backing.page_size > 4 * kKiB && !bound;
  PrefaultStats stats = prefault(os, region.mapping.data(), region.mapping.size(), region.backing.page_size,
                                 threads_for_node(topology, node, options.prefault_threads), cpus,
                                 reserved ? PrefaultMethod::kTouch : PrefaultMethod::kPopulate);
  region.report.fault_seconds = seconds_since(os, start);
  region.report.prefault_threads = stats.threads;

  start = os.monotonic_ns();
  region.report.placement =
      verify_placement(os, region.mapping.data(), region.mapping.size(), region.backing.page_size);
  region.report.verify_seconds = seconds_since(os, start);
  if (node >= 0 && !region.report.placement.all_on(node)) {
    std::string message = cat("rank ", region.request.rank, " asked for node ", node, ", its pages are on ",
                              region.report.placement.describe());
    if (options.strict) throw Error(cat("strict: ", message));
    region.report.fallback += cat(region.report.fallback.empty() ? "" : "; ", message);
  }
}

void check_requests(const std::vector<RegionRequest>& regions) {
  if (regions.empty()) throw Error("an arena needs at least one region");
  std::set<uint32_t> ranks;
  for (const RegionRequest& request : regions) {
    if (request.bytes == 0) throw Error(cat("rank ", request.rank, " asks for a region of size 0"));
    if (!ranks.insert(request.rank).second) throw Error(cat("rank ", request.rank, " is given twice"));
  }
}

}  // namespace

std::vector<RegionRequest> split_evenly(uint64_t total_bytes, uint32_t ranks) {
  if (ranks == 0) throw Error("--ranks must be at least 1");
  if (total_bytes < ranks) {
    throw Error(cat("size ", total_bytes, " bytes cannot be split over ", ranks, " ranks"));
  }
  std::vector<RegionRequest> requests;
  for (uint32_t rank = 0; rank < ranks; ++rank) {
    requests.push_back({rank, total_bytes / ranks + (rank < total_bytes % ranks ? 1 : 0), -1});
  }
  return requests;
}

ArenaReport create_arena(Os& os, std::string_view name, const std::vector<RegionRequest>& regions,
                         const ArenaOptions& options, const RegionProgress& progress) {
  check_arena_name(name);
  check_requests(regions);
  for (const ArenaListing& listing : list_arenas(os, options)) {
    if (listing.name == name) {
      throw Error(cat("arena '", name, "' already exists (", listing.regions.size(),
                      " region files): destroy it first with hugepin arena destroy ", name), EEXIST);
    }
  }
  PoolState pool = read_pool(os);
  Topology topology = read_topology(os);
  for (const RegionRequest& request : regions) {
    if (request.node >= 0 && topology.find(request.node) == nullptr) {
      throw Error(cat("rank ", request.rank, " asks for NUMA node ", request.node, ", which this machine does not have (",
                      topology.nodes.size(), " nodes)"));
    }
  }

  std::vector<PendingRegion> pending(regions.size());
  PagesTaken taken;
  for (size_t i = 0; i < regions.size(); ++i) {
    PendingRegion& region = pending[i];
    region.request = regions[i];
    region.backing = choose_backing(pool, region.request, options, taken);
    region.dir = arena_data_dir(region.backing.root_dir, name);
    region.path = cat(region.dir, "/", region_file_name(region.request.rank));
    region.report.rank = region.request.rank;
    region.report.path = region.path;
    region.report.bytes_requested = region.request.bytes;
    region.report.node_requested = region.request.node;
    region.report.fallback = region.backing.fallback;
  }
  check_shm_space(os, pending);

  try {
    for (PendingRegion& region : pending) reserve_region(os, region, name, options);

    // Prefault: one driver thread per node, so nodes fault in parallel; each driver spreads a
    // region over its node's CPUs. The first failure is rethrown once every driver is done.
    std::map<int, std::vector<PendingRegion*>> by_node;
    for (PendingRegion& region : pending) by_node[region.request.node].push_back(&region);
    std::vector<std::vector<PendingRegion*>> groups;
    for (auto& [node, group] : by_node) groups.push_back(std::move(group));
    std::mutex progress_mutex;
    run_on_threads(static_cast<unsigned>(groups.size()), [&](unsigned driver) {
      for (PendingRegion* region : groups[driver]) {
        populate_region(os, *region, topology, options);
        region->mapping = MappedRegion();  // the file keeps the pages; workers map their own
        if (progress) {
          std::lock_guard lock(progress_mutex);
          progress(region->report);
        }
      }
    });
  } catch (...) {
    remove_created(os, pending);
    throw;
  }

  ArenaReport report;
  report.name = std::string(name);
  bool all_no_pool = std::all_of(pending.begin(), pending.end(),
                                 [](const PendingRegion& region) { return region.backing.no_pool; });
  if (all_no_pool && pending.size() > 1) {
    // One line for the common case of a machine with no pool, not one per rank.
    uint64_t total = 0;
    for (const PendingRegion& region : pending) total += region.request.bytes;
    uint64_t page = pool.default_page_size != 0 ? pool.default_page_size : 2 * kMiB;
    log::warn(cat("no hugepages are reserved: arena '", name, "' uses 4 KiB shared memory for its ", pending.size(),
                  " regions (hugepin pool set ", page_size_name(*round_up(total, page)), " --pagesize ",
                  page_size_name(page), ")"));
  }
  for (PendingRegion& region : pending) {
    if (!region.report.fallback.empty() && !(all_no_pool && pending.size() > 1)) log::warn(region.report.fallback);
    report.regions.push_back(std::move(region.report));
  }
  return report;
}

namespace {

// A region file as a listing shows it: anyone's, but never through a link, never opened (O_PATH),
// and only a regular file. nullopt when there is none; a refused one is added to `refused`.
std::optional<RegionFile> stat_region(Os& os, const std::string& root, std::string_view arena, uint32_t rank,
                                      std::vector<std::string>* refused) {
  const TrustedPath where = region_location(root, arena, rank);
  TrustedFile file;
  try {
    file = open_trusted(os, where, O_PATH, kListedRegionRule);
  } catch (const Error& error) {
    if (error.errno_value() == kRefusedErrno && refused != nullptr) refused->push_back(error.what());
    return std::nullopt;
  }
  RegionFile region;
  region.rank = rank;
  region.path = where.full();
  region.root = root;
  region.bytes = static_cast<uint64_t>(file.status.st_size);
  region.owner = file.status.st_uid;
  region.mode = file.status.st_mode & 07777;
  try {
    region.page_size = file_page_size(os, file.fd.get(), region.path);
  } catch (const Error&) {
    region.page_size = 0;
  }
  return region;
}

// The names in directory `where`, opened as a listing opens it; empty when it is missing or
// refused (then added to `refused`).
std::vector<std::string> listed_names(Os& os, const TrustedPath& where, std::vector<std::string>* refused) {
  std::vector<std::string> names;
  try {
    TrustedFile dir = open_trusted(os, where, O_PATH | O_DIRECTORY, kListedArenaDirRule);
    os.list_dir_at(dir.fd.get(), &names);
  } catch (const Error& error) {
    if (error.errno_value() == kRefusedErrno && refused != nullptr) refused->push_back(error.what());
  }
  return names;
}

}  // namespace

TrustedPath region_file_location(const RegionFile& file) {
  return {file.root, file.path.substr(std::min(file.path.size(), file.root.size() + 1))};
}

std::vector<std::string> arena_data_roots(Os& os, const ArenaOptions& where) {
  std::vector<std::string> roots;
  uint64_t default_size = read_default_page_size(os);
  if (!where.hugetlbfs_dir.empty()) roots.push_back(where.hugetlbfs_dir);
  for (const HugetlbfsMount& mount : read_hugetlbfs_mounts(os, default_size)) {
    if (std::find(roots.begin(), roots.end(), mount.dir) == roots.end()) roots.push_back(mount.dir);
  }
  roots.push_back(where.shm_dir);
  return roots;
}

std::vector<ArenaListing> list_arenas(Os& os, const ArenaOptions& where, std::vector<std::string>* refused) {
  std::map<std::string, std::vector<RegionFile>> found;
  for (const std::string& root : arena_data_roots(os, where)) {
    for (const std::string& arena : listed_names(os, {root, std::string(kDataDirName)}, refused)) {
      if (!is_valid_arena_name(arena)) continue;
      const TrustedPath dir = arena_data_location(root, arena);
      try {
        open_trusted(os, dir, O_PATH | O_DIRECTORY, kListedArenaDirRule);
      } catch (const Error& error) {
        if (error.errno_value() == kRefusedErrno && refused != nullptr) refused->push_back(error.what());
        continue;  // a link or a file where an arena's directory would be: not an arena
      }
      found[arena];  // an empty arena directory (a crash before any file) is listed too
      for (const std::string& file : listed_names(os, dir, refused)) {
        std::optional<uint32_t> rank = parse_region_file_name(file);
        if (!rank) continue;
        if (auto region = stat_region(os, root, arena, *rank, refused)) found[arena].push_back(*region);
      }
    }
  }
  std::vector<ArenaListing> listings;
  for (auto& [name, regions] : found) {
    std::sort(regions.begin(), regions.end(),
              [](const RegionFile& a, const RegionFile& b) { return a.rank < b.rank; });
    listings.push_back({name, std::move(regions)});
  }
  return listings;
}

std::optional<RegionFile> find_region(Os& os, std::string_view arena, uint32_t rank,
                                      const ArenaOptions& where) {
  check_arena_name(arena);
  for (const std::string& root : arena_data_roots(os, where)) {
    if (auto region = stat_region(os, root, arena, rank, nullptr)) return region;
  }
  return std::nullopt;
}

MappedRegion open_region(Os& os, std::string_view arena, uint32_t rank, bool writable,
                         const ArenaOptions& where) {
  check_arena_name(arena);
  // The first root that has the file, opened once, as it is checked: a planted file in an earlier
  // root is refused (and reported), not skipped for a later one.
  for (const std::string& root : arena_data_roots(os, where)) {
    try {
      return MappedRegion::open(os, region_location(root, arena, rank), writable);
    } catch (const Error& error) {
      if (error.errno_value() != ENOENT) throw;
    }
  }
  throw Error(cat("arena '", arena, "' has no region for rank ", rank, " (hugepin arena list)"), ENOENT);
}

size_t destroy_arena(Os& os, std::string_view name, const ArenaOptions& where) {
  check_arena_name(name);
  size_t removed = 0;
  bool found = false;
  for (const std::string& root : arena_data_roots(os, where)) {
    // Through descriptors: a link in place of the arena's directory is refused, and what is
    // removed is the entry in the directory that was checked, whatever happens to the names.
    TrustedFile top;
    TrustedFile dir;
    try {
      top = open_trusted(os, {root, std::string(kDataDirName)}, O_PATH | O_DIRECTORY, kListedArenaDirRule);
      dir = open_trusted(os, arena_data_location(root, name), O_PATH | O_DIRECTORY, kListedArenaDirRule);
    } catch (const Error& error) {
      if (error.errno_value() == ENOENT) continue;
      throw;
    }
    const std::string dir_path = arena_data_dir(root, name);
    std::vector<std::string> files;
    if (os.list_dir_at(dir.fd.get(), &files) < 0) continue;
    found = true;
    for (const std::string& file : files) {
      if (!parse_region_file_name(file)) continue;
      if (int rc = os.unlinkat(dir.fd.get(), file, 0); rc < 0 && rc != -ENOENT) {
        throw_errno(cat("cannot remove ", dir_path, "/", file), -rc);
      }
      ++removed;
    }
    if (int rc = os.unlinkat(top.fd.get(), std::string(name), AT_REMOVEDIR); rc < 0 && rc != -ENOENT) {
      throw_errno(cat("cannot remove ", dir_path, rc == -ENOTEMPTY ? " (it holds files hugepin did not create)" : ""),
                  -rc);
    }
  }
  if (!found) throw Error(cat("no arena named '", name, "' (hugepin arena list shows the arenas)"), ENOENT);
  return removed;
}

}  // namespace hugepin
