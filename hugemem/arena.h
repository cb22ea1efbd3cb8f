// Arenas: named sets of rank regions, one backing file per region.
//
// create_arena makes every region file (hugetlbfs, or 4 KiB shared memory as the fallback),
// sizes it exactly (rounded up to the page only), binds it to its node before first touch,
// prefaults it from parallel threads and reports where its pages landed. Any process can then
// open a region by arena name and rank. Files follow hugemem/naming.h, so list_arenas and
// destroy_arena find whatever a crashed process left.
//
// Thread-safety: free functions, safe to call concurrently for different arenas.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/os.h"
#include "hugemem/backing.h"
#include "hugemem/region.h"

namespace hugepin {

struct RegionReport {
  uint32_t rank = 0;
  std::string path;
  uint64_t bytes_requested = 0;
  uint64_t bytes = 0;  // the file's size: the request rounded up to the page
  int node_requested = -1;
  Placement placement;   // page size and nodes as obtained
  std::string fallback;  // why the region got less than asked; "" when it did not
  unsigned prefault_threads = 0;
  double reserve_seconds = 0;  // create, size, map, bind
  double fault_seconds = 0;    // prefault
  double verify_seconds = 0;   // page-node query
};

struct ArenaReport {
  std::string name;
  std::vector<RegionReport> regions;
};

// Called after each region is ready, from the creating thread or a per-node worker thread.
using RegionProgress = std::function<void(const RegionReport&)>;

// Creates arena `name` with one region per request. Throws Error (leaving nothing behind) when the
// name is invalid or taken, a rank is given twice, a size is zero or too large, the pool cannot
// serve a region and strict is set, or a system call fails.
ArenaReport create_arena(Os& os, std::string_view name, const std::vector<RegionRequest>& regions,
                         const ArenaOptions& options, const RegionProgress& progress = {});

// `total_bytes` split evenly over `ranks` regions (the remainder to the first ones), no node.
// Throws Error when ranks is 0 or the total is smaller than one byte per rank.
std::vector<RegionRequest> split_evenly(uint64_t total_bytes, uint32_t ranks);

struct RegionFile {
  uint32_t rank = 0;
  std::string path;
  std::string root;  // the data root it is under: region_location(root, arena, rank) opens it
  uint64_t bytes = 0;
  uint64_t page_size = 0;
  uid_t owner = 0;
  mode_t mode = 0;
};

// Where `file` is, as base/trusted_file.h opens it: its root as given, the rest checked.
TrustedPath region_file_location(const RegionFile& file);

struct ArenaListing {
  std::string name;
  std::vector<RegionFile> regions;  // by rank
};

// Every directory that may hold arenas (each holds <dir>/hugepin/<arena>/): where.hugetlbfs_dir
// when set, every hugetlbfs mount in /proc/mounts, then where.shm_dir.
std::vector<std::string> arena_data_roots(Os& os, const ArenaOptions& where = {});

// Every arena with region files in a hugetlbfs mount or the shm dir of `where`, by name. Nothing
// is opened or followed: directories and files are looked at through O_PATH without following
// links (base/trusted_file.h, anyone's); a link, FIFO or other non-regular file where an arena
// directory or region file would be is left out, with one line saying so added to `refused`.
std::vector<ArenaListing> list_arenas(Os& os, const ArenaOptions& where = {},
                                      std::vector<std::string>* refused = nullptr);

// The file of one region, or nullopt when the arena has no such rank.
std::optional<RegionFile> find_region(Os& os, std::string_view arena, uint32_t rank,
                                      const ArenaOptions& where = {});

// Maps region `rank` of `arena`, the file found under the first data root that has it, opened
// as MappedRegion::open(TrustedPath) opens it. Throws Error naming the arena and rank when it does
// not exist (ENOENT), or the refusal when the file found is planted (kRefusedErrno).
MappedRegion open_region(Os& os, std::string_view arena, uint32_t rank, bool writable,
                         const ArenaOptions& where = {});

// Removes every file and directory of arena `name`; returns how many region files it removed.
// Directories are walked without following links; a link where the arena's directory would be
// is refused. Throws Error when no arena has that name, or one of its files cannot be removed.
size_t destroy_arena(Os& os, std::string_view name, const ArenaOptions& where = {});

}  // namespace hugepin
