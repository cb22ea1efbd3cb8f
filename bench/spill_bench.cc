#include "bench/spill_bench.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <linux/magic.h>
#include <mutex>
#include <random>

#include "base/error.h"
#include "base/pattern.h"
#include "base/size.h"
#include "base/trusted_file.h"
#include "base/unique_fd.h"
#include "disk/block_io.h"
#include "hugemem/arena.h"

namespace hugepin::bench {
namespace {

using Clock = std::chrono::steady_clock;

enum class Kind { kUringFixed, kPoolDirect, kPoolBuffered, kReference };

struct Method {
  Kind kind;
  std::string key;  // as --methods names it
  std::string name;
  bool direct;
};

std::vector<Method> chosen_methods(const std::vector<std::string>& keys) {
  const std::vector<Method> all{{Kind::kUringFixed, "uring", "io_uring fixed O_DIRECT", true},
                                {Kind::kPoolDirect, "pool", "pread/pwrite pool O_DIRECT", true},
                                {Kind::kPoolBuffered, "buffered", "pread/pwrite pool buffered", false},
                                {Kind::kReference, "device", "device sequential (reference)", true}};
  for (const std::string& key : keys) {
    if (std::none_of(all.begin(), all.end(), [&](const Method& method) { return method.key == key; })) {
      throw Error(cat("spill bench: no method '", key, "' (uring, pool, buffered, device)"));
    }
  }
  std::vector<Method> chosen;
  for (const Method& method : all) {
    if (keys.empty() || std::find(keys.begin(), keys.end(), method.key) != keys.end()) chosen.push_back(method);
  }
  return chosen;
}

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::string file_system_name(long type) {
  switch (type) {
    case EXT4_SUPER_MAGIC: return "ext4";
    case XFS_SUPER_MAGIC: return "xfs";
    case BTRFS_SUPER_MAGIC: return "btrfs";
    case TMPFS_MAGIC: return "tmpfs";
    case RAMFS_MAGIC: return "ramfs";
    default: return cat("file system 0x", std::hex, type);
  }
}

// The file under test is made in --dir, which others may share (/var/tmp): opened as
// base/trusted_file.h says, never through a link planted in its place.
constexpr FileRule kSpillFileRule{FileType::kRegular, FileOwners::kTrusted, "spill benchmark file"};

// The file under test, removed when the benchmark ends.
struct BenchFile {
  Os& os;
  std::string path;
  ~BenchFile() { os.unlink(path); }
};

// The same memory and the same chunks for every method: jobs of chunks in one random order.
struct Workload {
  std::byte* memory = nullptr;
  uint64_t bytes = 0;
  std::vector<std::vector<BlockSpan>> jobs;  // for the spill methods
  std::vector<std::vector<BlockSpan>> sequential;  // for the reference: 64 MiB spans in order
};

Workload make_workload(std::byte* memory, const SpillBenchOptions& options) {
  Workload workload{memory, options.bytes, {}, {}};
  const uint64_t chunks = (options.bytes + options.chunk_bytes - 1) / options.chunk_bytes;
  std::vector<uint64_t> order(chunks);
  for (uint64_t i = 0; i < chunks; ++i) order[i] = i;
  std::mt19937_64 random(options.seed);
  std::shuffle(order.begin(), order.end(), random);
  for (uint64_t first = 0; first < chunks; first += options.job_chunks) {
    std::vector<BlockSpan> job;
    for (uint64_t i = first; i < std::min(chunks, first + options.job_chunks); ++i) {
      const uint64_t offset = order[i] * options.chunk_bytes;
      job.push_back({offset, memory + offset, std::min(options.chunk_bytes, options.bytes - offset)});
    }
    workload.jobs.push_back(std::move(job));
  }
  const uint64_t piece = 64 * kMiB;
  for (uint64_t offset = 0; offset < options.bytes; offset += piece) {
    workload.sequential.push_back({{offset, memory + offset, std::min(piece, options.bytes - offset)}});
  }
  return workload;
}

// Submits every job at once and waits for all; throws the first failure.
void run_jobs(BlockIo& io, BlockOp op, const std::vector<std::vector<BlockSpan>>& jobs) {
  std::mutex mutex;
  std::condition_variable finished;
  size_t left = jobs.size();
  std::string failure;
  int failure_errno = 0;
  for (const std::vector<BlockSpan>& job : jobs) {
    io.submit(op, job, [&](BlockResult result) {
      std::lock_guard lock(mutex);
      if (!result.ok() && failure.empty()) {
        failure = result.failures.front().message;
        failure_errno = result.failures.front().errno_value;
      }
      if (--left == 0) finished.notify_one();
    });
  }
  std::unique_lock lock(mutex);
  finished.wait(lock, [&] { return left == 0; });
  if (!failure.empty()) throw Error(failure, failure_errno);
}

std::unique_ptr<BlockIo> make_engine(Os& os, const Method& method, const BlockFile& file, const Workload& workload,
                                     const SpillBenchOptions& options) {
  switch (method.kind) {
    case Kind::kUringFixed: {
      UringOptions uring;
      uring.queue_depth = options.queue_depth;
      uring.submit_batch = options.submit_batch;
      uring.request_bytes = options.request_bytes;
      uring.fixed_memory = {workload.memory, workload.bytes};
      uring.require_fixed = true;  // this row is the fixed-buffer path or nothing
      return make_uring_block_io(file, uring);
    }
    case Kind::kReference: {
      UringOptions uring;
      uring.queue_depth = options.reference_queue_depth;
      uring.submit_batch = options.reference_queue_depth;
      uring.request_bytes = options.reference_request_bytes;
      return make_uring_block_io(file, uring);
    }
    case Kind::kPoolDirect:
    case Kind::kPoolBuffered:
      return make_thread_pool_block_io(os, file, {options.threads, options.request_bytes});
  }
  return nullptr;
}

struct Sample {
  double seconds = 0;
  double cpu = 0;
};

// One timed pass of `method` in one direction. Every pass starts with the file out of the page
// cache (a read must come from the device; a direct write would otherwise pay for invalidating
// what a buffered pass left). A write includes fdatasync: buffered data is not on the device
// before it.
Sample measure(Os& os, const Method& method, BlockOp op, const std::string& path, const Workload& workload,
               const SpillBenchOptions& options, bool check, std::string* detail) {
  UniqueFd file = open_trusted(os, user_named(path), O_RDWR | (method.direct ? O_DIRECT : 0), kSpillFileRule).fd;
  const int fd = file.get();
  const BlockFile block_file{fd, path, method.direct, method.direct ? 4096u : 1u};
  std::unique_ptr<BlockIo> io = make_engine(os, method, block_file, workload, options);
  *detail = io->describe();
  if (int rc = os.fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); rc < 0) throw_errno(cat("cannot evict ", path), -rc);
  if (check && op == BlockOp::kRead) std::memset(workload.memory, 0, workload.bytes);
  const auto& jobs = method.kind == Kind::kReference ? workload.sequential : workload.jobs;
  const double cpu_before = cpu_seconds();
  const auto start = Clock::now();
  run_jobs(*io, op, jobs);
  if (op == BlockOp::kWrite) {
    if (int rc = os.fdatasync(fd); rc < 0) throw_errno(cat("cannot sync ", path), -rc);
  }
  Sample sample{std::chrono::duration<double>(Clock::now() - start).count(), cpu_seconds() - cpu_before};
  if (check && op == BlockOp::kRead) {
    if (auto bad = find_pattern_mismatch(workload.memory, workload.bytes, options.seed)) {
      throw Error(cat(method.name, " read back wrong data at offset ", *bad, " of ", path));
    }
  }
  return sample;
}

SpillBenchRow summarize_row(const Method& method, BlockOp op, std::string detail, const std::vector<Sample>& samples,
                            uint64_t bytes) {
  std::vector<double> rates, cpu;
  const double gb = static_cast<double>(bytes) / 1e9;
  for (const Sample& sample : samples) {
    rates.push_back(gb / sample.seconds);
    cpu.push_back(sample.cpu / gb);
  }
  return {method.name, std::string(block_op_name(op)), std::move(detail), summarize(rates), summarize(cpu)};
}

}  // namespace

SpillBenchReport run_spill_bench(Os& os, const SpillBenchOptions& options,
                                 const std::function<void(const std::string&)>& progress) {
  if (options.bytes == 0 || options.chunk_bytes == 0 || options.chunk_bytes % 4096 != 0 || options.bytes % 4096 != 0 ||
      options.request_bytes == 0 || options.request_bytes % 4096 != 0) {
    throw Error(cat("spill bench: size ", options.bytes, ", chunk ", options.chunk_bytes, " and request ",
                    options.request_bytes, " must be non-zero multiples of 4096"));
  }
  ArenaOptions arena;
  arena.page_size = options.page_size;
  arena.strict = options.page_size != 0;
  const std::string name = cat("bench-spill-", getpid());
  ArenaReport created = create_arena(os, name, {{0, options.bytes, -1}}, arena);
  struct Cleanup {
    Os& os;
    std::string name;
    ArenaOptions arena;
    ~Cleanup() {
      try {
        destroy_arena(os, name, arena);
      } catch (const Error&) {
      }
    }
  } cleanup{os, name, arena};
  MappedRegion region = open_region(os, name, 0, true, arena);
  fill_pattern(region.data(), options.bytes, options.seed);
  Workload workload = make_workload(region.data(), options);

  SpillBenchReport report;
  report.page_size = created.regions.front().placement.page_size;
  BenchFile file{os, cat(options.dir, "/hugepin-bench-spill-", getpid(), ".data")};
  report.file = file.path;
  {
    UniqueFd handle = open_trusted(os, user_named(file.path), O_RDWR | O_CREAT | O_EXCL, kSpillFileRule, 0600).fd;
    const int fd = handle.get();
    if (int rc = os.fallocate(fd, 0, options.bytes); rc < 0) {
      throw_errno(cat("cannot allocate ", format_bytes(options.bytes), " for ", file.path), -rc);
    }
    struct statfs fs {};
    struct stat st {};
    os.fstatfs(fd, &fs);
    os.fstat(fd, &st);
    report.file_system = cat(file_system_name(static_cast<long>(fs.f_type)), " on device ", major(st.st_dev), ":",
                             minor(st.st_dev));
  }
  report.cache_note =
      "page cache: the file is evicted (posix_fadvise DONTNEED; every write ends with fdatasync) before every pass";

  const std::vector<Method> all = chosen_methods(options.methods);
  // One unmeasured write of the whole file first: fallocate leaves unwritten extents, whose first
  // write costs a conversion (and makes ext4 punt io_uring writes to worker threads); a spill file
  // in use is past that, so no measured pass should pay it.
  {
    if (progress) progress("warm-up: writing the file once");
    std::string ignored;
    measure(os, {Kind::kPoolDirect, "pool", "warm-up", true}, BlockOp::kWrite, file.path, workload, options, false, &ignored);
  }
  std::vector<std::vector<Sample>> writes(all.size()), reads(all.size());
  std::vector<std::string> details(all.size());
  for (unsigned run = 0; run < options.repeat; ++run) {
    for (size_t m = 0; m < all.size(); ++m) {
      if (progress) progress(cat(all[m].name, ": write, run ", run + 1, "/", options.repeat));
      writes[m].push_back(measure(os, all[m], BlockOp::kWrite, file.path, workload, options, false, &details[m]));
      if (progress) progress(cat(all[m].name, ": read, run ", run + 1, "/", options.repeat));
      reads[m].push_back(measure(os, all[m], BlockOp::kRead, file.path, workload, options, run == 0, &details[m]));
    }
  }
  for (BlockOp op : {BlockOp::kWrite, BlockOp::kRead}) {
    for (size_t m = 0; m < all.size(); ++m) {
      report.rows.push_back(summarize_row(all[m], op, details[m], op == BlockOp::kWrite ? writes[m] : reads[m], options.bytes));
    }
  }
  return report;
}

}  // namespace hugepin::bench
