#include "shim/arena_region.h"

#include <fcntl.h>

#include <cerrno>

#include "base/file_locks.h"
#include "base/size.h"
#include "base/trusted_file.h"
#include "base/unique_fd.h"
#include "hugemem/arena.h"
#include "hugemem/naming.h"
#include "ipc/control_segment.h"
#include "shim/fallback.h"

namespace hugepin {
namespace {

// How long opening the region waits for hugepind to finish destroying the arena (a moment).
constexpr int64_t kClaimTimeoutNs = 2'000'000'000;

// A rank a worker has attached to holds KV that the scheduler may record as stored (issue 20,
// item 9: a shim process overwrote a --keep demo's stored chunks): the shim does not take it as
// free space. Read with pread: the shim maps no segment (a truncation would raise SIGBUS in the
// application) and installs no signal handler.
void refuse_written_rank(Os& os, const TrustedFile& segment, const ShimConfig& config, const std::string& where) {
  RankRecordReading reading;
  try {
    reading = read_rank_record(os, segment.fd.get(), static_cast<uint64_t>(segment.status.st_size), config.rank);
  } catch (const Error& error) {
    throw Fallback("arena-open", cat("cannot use ", where, ": control segment ", control_segment_path(config.arena), ": ",
                                     error.what()));
  }
  const RankStatus& status = reading.status;
  if (status.attach_generation == 0) return;
  throw Fallback("arena-kv", cat(where, " holds KV written through its control segment (a worker attached ",
                                 status.attach_generation, status.attach_generation == 1 ? " time" : " times",
                                 status.alive ? cat(", live pid ", status.pid, " attached now") : std::string(),
                                 ", state ", rank_state_name(status.state), "): the shim does not hand it out as free ",
                                 "space; give the shim an arena of its own (hugepin arena create)"));
}

}  // namespace

std::unique_ptr<ArenaRegion> ArenaRegion::open(Os& os, const ShimConfig& config) {
  const std::string where = cat("arena '", config.arena, "' rank ", config.rank);
  if (!is_valid_arena_name(config.arena)) {
    throw Fallback("arena-name", cat("HUGEPIN_ARENA='", config.arena, "' is not an arena name: use 1-64 letters, digits, "
                                     "'.', '_' or '-', not starting with '.'"));
  }
  // A claim as workers make one (ipc/arena_lock.h): the control segment held shared while the
  // region is opened and locked, so hugepind's retention either sees the region locked or has
  // destroyed the arena first (the segment is then unlinked and this falls through). An arena
  // without a control segment (stale data, or made without one) is not claimed: removing stale
  // files checks the region lock just before, not under a lock, so a shim mapping such a region
  // in that moment keeps its pages but loses the names. Dropped when `segment` closes. Opened as
  // base/trusted_file.h says: a planted link or FIFO is refused, never followed or waited on.
  TrustedFile segment;
  try {
    segment = open_trusted(os, {std::string(kControlSegmentDir), control_segment_name(config.arena)}, O_RDONLY,
                           {FileType::kRegular, FileOwners::kTrusted, "control segment"});
  } catch (const Error& error) {
    if (error.errno_value() != ENOENT) throw Fallback("arena-open", cat("cannot claim ", where, ": ", error.what()));
  }
  if (segment.fd) {
    if (int rc = lock_shared_while_linked(os, segment.fd.get(), kClaimTimeoutNs); rc < 0) {
      throw Fallback(rc == -ENOENT ? "arena-gone" : "arena-locked",
                     rc == -ENOENT ? cat(where, ": the arena was destroyed while this process opened it")
                                   : cat("cannot claim ", where, " (control segment ", control_segment_path(config.arena),
                                         "): ", errno_text(-rc)));
    }
    refuse_written_rank(os, segment, config, where);
  }
  ArenaOptions options;
  options.hugetlbfs_dir = config.hugetlbfs_dir;
  options.shm_dir = config.shm_dir;
  MappedRegion mapping;
  try {
    mapping = open_region(os, config.arena, config.rank, /*writable=*/true, options);
  } catch (const Error& error) {
    throw Fallback("arena-open", cat("cannot use ", where, " (rank from ", config.rank_source, "): ", error.what()));
  }
  // Held while mapped; others ask with file_is_locked, which takes no lock (base/file_locks.h).
  if (int rc = lock_file_for_use(os, mapping.fd()); rc < 0) {
    throw Fallback("arena-busy", rc == -EAGAIN || rc == -EACCES
                                     ? cat(where, " is in use by another process (", mapping.path(),
                                           "): give each process its own rank with HUGEPIN_RANK")
                                     : cat("cannot lock ", mapping.path(), ": ", errno_text(-rc)));
  }
  if (config.strict && mapping.page_size() <= 4 * kKiB) {
    throw Fallback("arena-4k", cat("strict: ", where, " is on 4 KiB pages (", mapping.path(), ")"));
  }
  if (mapping.size() % mapping.page_size() != 0) {
    throw Fallback("arena-size", cat(where, ": region file ", mapping.path(), " of ", mapping.size(),
                                     " bytes is not a whole number of ", page_size_name(mapping.page_size()), " pages"));
  }
  return std::unique_ptr<ArenaRegion>(new ArenaRegion(config.arena, config.rank, std::move(mapping)));
}

ArenaRegion::ArenaRegion(std::string arena, uint32_t rank, MappedRegion mapping)
    : arena_(std::move(arena)),
      rank_(rank),
      mapping_(std::move(mapping)),
      allocator_(mapping_.size(), mapping_.page_size()) {}

std::optional<void*> ArenaRegion::allocate(uint64_t bytes, uint64_t* given) {
  std::optional<Extent> extent = allocator_.allocate(bytes);
  if (!extent) return std::nullopt;
  *given = extent->length;
  return mapping_.data() + extent->offset;
}

bool ArenaRegion::release(void* address) {
  auto* byte = static_cast<std::byte*>(address);
  if (byte < mapping_.data() || byte >= mapping_.data() + mapping_.size()) return false;
  return allocator_.release(static_cast<uint64_t>(byte - mapping_.data()));
}

std::string ArenaRegion::exhausted_message(uint64_t bytes) const {
  return cat("arena '", arena_, "' rank ", rank_, " has no free piece of ", format_bytes(bytes), " (",
             format_bytes(allocator_.free_bytes()), " of ", format_bytes(mapping_.size()), " free, the largest piece ",
             format_bytes(allocator_.largest_free()), ")");
}

}  // namespace hugepin
