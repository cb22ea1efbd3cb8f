#include "disk/snapshot.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "base/contract.h"
#include "base/error.h"
#include "base/log.h"
#include "base/size.h"
#include "base/trusted_file.h"
#include "base/unique_fd.h"
#include "disk/crc32c.h"
#include "hugemem/arena.h"
#include "hugemem/naming.h"

namespace hugepin {
namespace {


constexpr std::string_view kManifestName = "manifest.json";
constexpr std::string_view kLockName = ".lock";
constexpr std::string_view kTmpPrefix = ".tmp-";
constexpr std::string_view kManifestTmpPrefix = ".manifest-";
constexpr uint64_t kJobBytes = 64 * kMiB;  // chunks per spill job: progress and checks follow jobs
constexpr uint64_t kMaxManifestBytes = 4 * kGiB;

std::string join(const std::string& dir, std::string_view name) { return cat(dir, "/", name); }

std::string hex32(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

// --- files and directories through the Os seam ---

// Files in a snapshot directory are opened as base/trusted_file.h says: a link or FIFO planted in
// the directory is refused, never followed or waited on.
constexpr FileRule kSnapshotFileRule{FileType::kRegular, FileOwners::kTrusted, "snapshot file"};

std::string read_whole_file(Os& os, const std::string& path) {
  TrustedFile opened = open_trusted(os, user_named(path), O_RDONLY, kSnapshotFileRule);
  const int fd = opened.fd.get();
  const uint64_t size = static_cast<uint64_t>(opened.status.st_size);
  if (size > kMaxManifestBytes) throw Error(cat(path, " is ", format_bytes(size), ": too large for a manifest"));
  std::string text(size, '\0');
  for (uint64_t done = 0; done < size;) {
    ssize_t n = os.pread(fd, text.data() + done, size - done, done);
    if (n == -EINTR) continue;
    if (n < 0) throw_errno(cat("cannot read ", path, " at offset ", done), static_cast<int>(-n));
    if (n == 0) throw Error(cat("cannot read ", path, " at offset ", done, ": it shrank while being read"));
    done += static_cast<uint64_t>(n);
  }
  return text;
}

// Writes `text` to a new file at `path` and syncs it.
void write_synced_file(Os& os, const std::string& path, std::string_view text) {
  UniqueFd file = open_trusted(os, user_named(path), O_WRONLY | O_CREAT | O_TRUNC, kSnapshotFileRule, 0600).fd;
  const int fd = file.get();
  for (uint64_t done = 0; done < text.size();) {
    ssize_t n = os.pwrite(fd, text.data() + done, text.size() - done, done);
    if (n == -EINTR) continue;
    if (n < 0) throw_errno(cat("cannot write ", path, " at offset ", done, " (", text.size() - done, " bytes)"), static_cast<int>(-n));
    done += static_cast<uint64_t>(n);
  }
  if (int rc = os.fsync(fd); rc < 0) throw_errno(cat("cannot sync ", path), -rc);
  if (int rc = file.close(); rc < 0) throw_errno(cat("cannot close ", path), -rc);
}

// Makes the names in `dir` (created, renamed, removed) survive a crash.
void sync_dir(Os& os, const std::string& dir) {
  int fd = os.open(dir, O_RDONLY | O_DIRECTORY, 0);
  if (fd < 0) throw_errno(cat("cannot open directory ", dir), -fd);
  UniqueFd handle(os, fd);
  if (int rc = os.fsync(fd); rc < 0) throw_errno(cat("cannot sync directory ", dir), -rc);
}

void rename_path(Os& os, const std::string& from, const std::string& to) {
  if (int rc = os.rename(from, to); rc < 0) throw_errno(cat("cannot rename ", from, " to ", to), -rc);
}

// Removes a directory of files (what a save leaves: one level). Returns false when something
// stays (logged).
bool remove_tree(Os& os, const std::string& dir) {
  std::vector<std::string> names;
  if (int rc = os.list_data_dir(dir, &names); rc < 0) return rc == -ENOENT || rc == -ENOTDIR ? os.unlink(dir) == 0 : false;
  for (const std::string& name : names) {
    std::string path = join(dir, name);
    if (int rc = os.unlink(path); rc < 0 && rc != -ENOENT) {
      log::warn(cat("cannot remove ", path, ": ", errno_text(-rc)));
      return false;
    }
  }
  if (int rc = os.rmdir(dir); rc < 0 && rc != -ENOENT) {
    log::warn(cat("cannot remove ", dir, ": ", errno_text(-rc)));
    return false;
  }
  return true;
}

// flock on DIR/.lock for the life of this object: exclusive for a save, shared for a load.
class DirLock {
 public:
  DirLock(Os& os, const std::string& dir, bool exclusive) : dir_(dir), exclusive_(exclusive) {
    const std::string path = join(dir, kLockName);
    try {
      fd_ = open_trusted(os, user_named(path), O_RDWR | O_CREAT, kSnapshotFileRule, 0600).fd;
    } catch (const Error& error) {
      if (exclusive || error.errno_value() == kRefusedErrno) throw;
      fd_ = open_trusted(os, user_named(path), O_RDONLY, kSnapshotFileRule).fd;  // a load from a read-only copy
    }
    const int fd = fd_.get();
    int rc = os.flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB);
    if (rc == -EWOULDBLOCK) {
      throw Error(cat("another hugepin ", exclusive ? "save or load" : "save", " is using ", dir, " (", path, " is locked)"),
                  EWOULDBLOCK);
    }
    if (rc < 0) throw_errno(cat("cannot lock ", path), -rc);
  }

  const std::string& dir() const { return dir_; }
  bool exclusive() const { return exclusive_; }

 private:
  std::string dir_;
  bool exclusive_;
  UniqueFd fd_;
};

// --- the arena ---

ArenaListing find_arena(Os& os, std::string_view arena, const ArenaOptions& where) {
  check_arena_name(arena);
  for (ArenaListing& listing : list_arenas(os, where)) {
    if (listing.name == arena && !listing.regions.empty()) return std::move(listing);
  }
  throw Error(cat("no arena named '", arena, "' with regions (hugepin arena list shows the arenas)"));
}

SpillOptions spill_options(const SnapshotOptions& options, uint64_t chunk_bytes, SpillOpen open) {
  SpillOptions spill = options.io;
  spill.chunk_bytes = chunk_bytes;
  spill.open = open;
  spill.mode = 0600;
  return spill;
}

// The chunks of `file` in jobs of about kJobBytes, in order.
std::vector<std::vector<uint64_t>> chunk_jobs(const SpillFile& file) {
  const uint64_t per_job = std::max<uint64_t>(1, kJobBytes / file.chunk_bytes());
  std::vector<std::vector<uint64_t>> jobs;
  for (uint64_t first = 0; first < file.chunk_count(); first += per_job) {
    std::vector<uint64_t> job;
    for (uint64_t chunk = first; chunk < std::min(file.chunk_count(), first + per_job); ++chunk) job.push_back(chunk);
    jobs.push_back(std::move(job));
  }
  return jobs;
}

struct Progress {
  const std::function<void(uint64_t, uint64_t)>* callback = nullptr;
  uint64_t done = 0;
  uint64_t total = 0;
  void add(uint64_t bytes) {
    done += bytes;
    if (*callback) (*callback)(done, total);
  }
};

struct Backend {
  std::string description;
  std::string fallback;
};

// What a save or a load reports, from the manifest it wrote or read.
void fill_report(SnapshotReport& report, std::string arena, const std::string& dir, const SnapshotManifest& manifest,
                 const Progress& progress, const Backend& backend, double seconds) {
  report.arena = std::move(arena);
  report.dir = dir;
  report.generation = manifest.generation;
  report.regions = manifest.regions.size();
  report.bytes = progress.total;
  for (const RegionManifest& region : manifest.regions) report.chunks += region.chunks;
  report.backend = backend.description;
  report.fallback = backend.fallback;
  report.seconds = seconds;
}

// Writes one region to `path` through the spill path, checksumming each chunk while the writes
// are in flight, then syncs the file.
RegionManifest save_region(Os& os, const RegionFile& region, const std::string& path, uint64_t generation,
                           const SnapshotOptions& options, Progress& progress, Backend& backend) {
  MappedRegion mapped = MappedRegion::open(os, region_file_location(region), true);  // writable: io_uring pins it
  std::span<std::byte> memory{mapped.data(), mapped.size()};
  SpillFile file = SpillFile::open(os, path, memory, spill_options(options, options.chunk_bytes, SpillOpen::kCreate));
  if (backend.description.empty()) backend = {file.backend().description, file.backend().fallback};

  RegionManifest manifest;
  manifest.rank = region.rank;
  manifest.bytes = mapped.size();
  manifest.page_size = region.page_size;
  manifest.chunk_bytes = options.chunk_bytes;
  manifest.chunks = file.chunk_count();
  manifest.file = snapshot_data_file_name(generation, region.rank);
  manifest.crc32c.resize(manifest.chunks);

  std::vector<std::vector<uint64_t>> jobs = chunk_jobs(file);
  std::vector<SpillCompletion> completions;
  for (std::vector<uint64_t>& job : jobs) completions.push_back(file.spill(job));
  for (size_t j = 0; j < jobs.size(); ++j) {
    const uint64_t first = jobs[j].front();
    const uint64_t offset = first * options.chunk_bytes;
    const uint64_t bytes = std::min<uint64_t>(jobs[j].size() * options.chunk_bytes, mapped.size() - offset);
    crc32c_chunks(mapped.data() + offset, bytes, options.chunk_bytes,
                  std::span<uint32_t>(manifest.crc32c).subspan(first, jobs[j].size()));
    completions[j].wait().throw_if_failed();
    progress.add(bytes);
  }
  file.sync();
  return manifest;
}

struct ChunkMismatch {
  uint32_t rank = 0;
  uint64_t chunk = 0;
  std::string file;
  uint64_t offset = 0;
  uint32_t stored = 0;
  uint32_t read = 0;
};

// Reads one region back from its data file, checking every chunk's CRC32C; zero-fills the chunks
// that fail and returns them.
std::vector<ChunkMismatch> load_region(Os& os, const RegionFile& region, const RegionManifest& manifest,
                                       const std::string& path, const SnapshotOptions& options, Progress& progress,
                                       Backend& backend) {
  MappedRegion mapped = MappedRegion::open(os, region_file_location(region), true);
  std::span<std::byte> memory{mapped.data(), mapped.size()};
  SpillFile file = SpillFile::open(os, path, memory, spill_options(options, manifest.chunk_bytes, SpillOpen::kExisting));
  if (backend.description.empty()) backend = {file.backend().description, file.backend().fallback};

  std::vector<ChunkMismatch> mismatches;
  std::vector<std::vector<uint64_t>> jobs = chunk_jobs(file);
  std::vector<SpillCompletion> completions;
  for (std::vector<uint64_t>& job : jobs) completions.push_back(file.restore(job));
  std::vector<uint32_t> crcs;
  for (size_t j = 0; j < jobs.size(); ++j) {
    completions[j].wait().throw_if_failed();
    const uint64_t first = jobs[j].front();
    const uint64_t offset = first * manifest.chunk_bytes;
    const uint64_t bytes = std::min<uint64_t>(jobs[j].size() * manifest.chunk_bytes, mapped.size() - offset);
    crcs.resize(jobs[j].size());
    crc32c_chunks(mapped.data() + offset, bytes, manifest.chunk_bytes, crcs);
    for (size_t i = 0; i < crcs.size(); ++i) {
      const uint64_t chunk = first + i;
      if (crcs[i] == manifest.crc32c[chunk]) continue;
      const uint64_t chunk_offset = chunk * manifest.chunk_bytes;
      std::memset(mapped.data() + chunk_offset, 0, file.chunk_size(chunk));
      mismatches.push_back({region.rank, chunk, path, chunk_offset, manifest.crc32c[chunk], crcs[i]});
    }
    progress.add(bytes);
  }
  return mismatches;
}

std::string rank_list(const std::vector<uint32_t>& ranks) {
  std::string text;
  for (uint32_t rank : ranks) text += cat(text.empty() ? "" : ",", rank);
  return text;
}

// Refuses, naming the field, a snapshot that does not fit the arena.
void check_fits(const SnapshotManifest& manifest, const ArenaListing& arena, const SnapshotOptions& options,
                const std::string& dir) {
  std::vector<uint32_t> saved;
  std::vector<uint32_t> present;
  for (const RegionManifest& region : manifest.regions) saved.push_back(region.rank);
  for (const RegionFile& region : arena.regions) present.push_back(region.rank);
  std::sort(saved.begin(), saved.end());
  if (saved != present) {
    throw Error(cat("snapshot ", dir, " does not fit arena '", arena.name, "': field 'ranks' is [", rank_list(saved),
                    "] in the snapshot, [", rank_list(present), "] in the arena"));
  }
  for (const RegionManifest& region : manifest.regions) {
    auto found = std::find_if(arena.regions.begin(), arena.regions.end(),
                              [&](const RegionFile& file) { return file.rank == region.rank; });
    if (found->bytes != region.bytes) {
      throw Error(cat("snapshot ", dir, " does not fit arena '", arena.name, "': field 'bytes' of rank ", region.rank,
                      " is ", region.bytes, " in the snapshot, ", found->bytes, " in the arena"));
    }
    if (options.chunk_bytes != 0 && options.chunk_bytes != region.chunk_bytes) {
      throw Error(cat("snapshot ", dir, " does not fit: field 'chunk_bytes' of rank ", region.rank, " is ",
                      region.chunk_bytes, " in the snapshot, ", options.chunk_bytes, " asked"));
    }
  }
  if (manifest.plan && options.plan && *manifest.plan != *options.plan) {
    throw Error(cat("snapshot ", dir, " does not fit arena '", arena.name,
                    "': field 'plan' differs (the snapshot was saved from another plan)"));
  }
}

void step(const SnapshotOptions& options, std::string_view name) {
  if (options.on_step) options.on_step(name);
}

// Removes what earlier saves left: temporaries, and data directories the committed manifest does
// not name. REQUIRES: `lock` is held exclusively.
std::vector<std::string> remove_leftovers(Os& os, const DirLock& lock, std::optional<uint64_t> committed) {
  HUGEPIN_REQUIRE(lock.exclusive(), lock.dir(), " is locked shared");
  const std::string& dir = lock.dir();
  std::vector<std::string> names;
  if (int rc = os.list_data_dir(dir, &names); rc < 0) throw_errno(cat("cannot list ", dir), -rc);
  std::vector<std::string> removed;
  const std::string keep = committed ? snapshot_data_dir_name(*committed) : "";
  for (const std::string& name : names) {
    const bool temporary = name.starts_with(kTmpPrefix) || name.starts_with(kManifestTmpPrefix);
    const bool stale_data = name.starts_with("data-") && name != keep;
    if (!temporary && !stale_data) continue;
    const std::string path = join(dir, name);
    if (name.starts_with(kManifestTmpPrefix) ? os.unlink(path) == 0 : remove_tree(os, path)) removed.push_back(name);
  }
  return removed;
}

std::optional<SnapshotManifest> committed_manifest(Os& os, const std::string& dir) {
  try {
    return read_snapshot_manifest(os, dir);
  } catch (const Error& error) {
    if (error.errno_value() != ENOENT) log::warn(cat(error.what(), ": the new save replaces it"));
    return std::nullopt;
  }
}

}  // namespace

SnapshotManifest read_snapshot_manifest(Os& os, const std::string& dir) {
  const std::string path = join(dir, kManifestName);
  std::string text;
  try {
    text = read_whole_file(os, path);
  } catch (const Error& error) {
    if (error.errno_value() == ENOENT) throw Error(cat(dir, " holds no snapshot (no ", kManifestName, ")"), ENOENT);
    throw;
  }
  return manifest_from_json(text, path);
}

SnapshotReport save_snapshot(Os& os, std::string_view arena, const std::string& dir, const SnapshotOptions& options) {
  const int64_t start = os.monotonic_ns();
  if (options.chunk_bytes == 0) throw Error("the snapshot chunk size must not be 0");
  ArenaListing listing = find_arena(os, arena, options.where);
  if (int rc = os.mkdir(dir, 0700); rc < 0 && rc != -EEXIST) throw_errno(cat("cannot create ", dir), -rc);
  DirLock lock(os, dir, true);

  std::optional<SnapshotManifest> previous = committed_manifest(os, dir);
  SnapshotReport report;
  report.removed = remove_leftovers(os, lock, previous ? std::optional(previous->generation) : std::nullopt);

  SnapshotManifest manifest;
  manifest.arena = std::string(arena);
  manifest.generation = (previous ? previous->generation : 0) + 1;
  manifest.created_unix = static_cast<int64_t>(std::time(nullptr));
  manifest.plan = options.plan;
  const std::string tmp = join(dir, cat(kTmpPrefix, ::getpid()));
  const std::string data_dir = join(dir, snapshot_data_dir_name(manifest.generation));
  const std::string manifest_tmp = join(dir, cat(kManifestTmpPrefix, ::getpid(), ".tmp"));
  if (int rc = os.mkdir(tmp, 0700); rc < 0) throw_errno(cat("cannot create ", tmp), -rc);

  Progress progress{&options.progress, 0, 0};
  for (const RegionFile& region : listing.regions) progress.total += region.bytes;
  Backend backend;
  bool renamed = false;
  try {
    for (const RegionFile& region : listing.regions) {
      const std::string path = join(tmp, cat("rank-", region.rank, ".data"));
      try {
        manifest.regions.push_back(save_region(os, region, path, manifest.generation, options, progress, backend));
      } catch (const Error& error) {
        throw Error(cat("cannot save rank ", region.rank, " of arena '", arena, "': ", error.what()), error.errno_value());
      }
    }
    sync_dir(os, tmp);
    step(options, "data-written");
    rename_path(os, tmp, data_dir);
    renamed = true;
    sync_dir(os, dir);
    step(options, "data-renamed");
    write_synced_file(os, manifest_tmp, manifest_to_json(manifest));
    step(options, "manifest-written");
    rename_path(os, manifest_tmp, join(dir, kManifestName));  // the commit point
  } catch (...) {
    remove_tree(os, renamed ? data_dir : tmp);
    os.unlink(manifest_tmp);
    throw;
  }
  sync_dir(os, dir);
  step(options, "committed");
  if (previous) {
    const std::string old = join(dir, snapshot_data_dir_name(previous->generation));
    if (!remove_tree(os, old)) log::warn(cat("the previous snapshot's data stays in ", old, ": the next save removes it"));
  }
  step(options, "cleaned");

  fill_report(report, manifest.arena, dir, manifest, progress, backend, seconds_since(os, start));
  return report;
}

SnapshotReport load_snapshot(Os& os, std::string_view arena, const std::string& dir, const SnapshotOptions& options) {
  const int64_t start = os.monotonic_ns();
  ArenaListing listing = find_arena(os, arena, options.where);
  if (int fd = os.open(dir, O_RDONLY | O_DIRECTORY, 0); fd < 0) {
    throw_errno(cat("cannot open snapshot directory ", dir), -fd);
  } else {
    os.close(fd);
  }
  DirLock lock(os, dir, false);
  SnapshotManifest manifest = read_snapshot_manifest(os, dir);
  check_fits(manifest, listing, options, dir);

  Progress progress{&options.progress, 0, 0};
  for (const RegionManifest& region : manifest.regions) progress.total += region.bytes;
  Backend backend;
  std::vector<ChunkMismatch> mismatches;
  for (const RegionFile& region : listing.regions) {
    const RegionManifest& saved = *std::find_if(manifest.regions.begin(), manifest.regions.end(),
                                                [&](const RegionManifest& r) { return r.rank == region.rank; });
    const std::string path = join(dir, saved.file);
    try {
      std::vector<ChunkMismatch> found = load_region(os, region, saved, path, options, progress, backend);
      mismatches.insert(mismatches.end(), found.begin(), found.end());
    } catch (const Error& error) {
      throw Error(cat("cannot load rank ", region.rank, " of arena '", arena, "' from ", dir, ": ", error.what(),
                      " (the arena holds a partial load)"),
                  error.errno_value());
    }
  }
  if (!mismatches.empty()) {
    const ChunkMismatch& first = mismatches.front();
    throw Error(cat("snapshot ", dir, ": rank ", first.rank, " chunk ", first.chunk, " fails its checksum (", first.file,
                    " at offset ", first.offset, ": stored ", hex32(first.stored), ", read ", hex32(first.read), "); ",
                    mismatches.size(), " chunk", mismatches.size() > 1 ? "s" : "",
                    " failed and", mismatches.size() > 1 ? " are" : " is", " zero-filled, every other chunk is loaded"));
  }

  SnapshotReport report;
  fill_report(report, std::string(arena), dir, manifest, progress, backend, seconds_since(os, start));
  return report;
}

}  // namespace hugepin
