#include "bench/host_pin_bench.h"

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "base/error.h"
#include "base/parallel.h"
#include "base/size.h"
#include "hugemem/arena.h"

namespace hugepin::bench {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct Sample {
  double reserve = 0, fault = 0, verify = 0;
};

Sample measure_arena(Os& os, const HostPinOptions& options, unsigned threads, uint64_t* page_size) {
  ArenaOptions arena;
  arena.page_size = options.page_size;
  arena.strict = options.page_size != 0;  // a benchmark of 2M pages must not quietly use 4K
  arena.prefault_threads = threads;
  arena.hugetlbfs_dir = options.hugetlbfs_dir;
  std::string name = cat("bench-pin-", getpid());
  ArenaReport report = create_arena(os, name, {{0, options.bytes, -1}}, arena);
  destroy_arena(os, name, arena);
  const RegionReport& region = report.regions.front();
  *page_size = region.placement.page_size;
  return {region.reserve_seconds, region.fault_seconds, region.verify_seconds};
}

// What engines do today before cudaHostRegister: anonymous 4 KiB memory, touched by threads.
Sample measure_anonymous(uint64_t bytes, unsigned threads) {
  Sample sample;
  auto start = Clock::now();
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (data == MAP_FAILED) throw_errno(cat("cannot map ", format_bytes(bytes), " of anonymous memory"), errno);
  // Keep transparent hugepages out of it: this row stands for plain 4 KiB pages.
  madvise(data, bytes, MADV_NOHUGEPAGE);
  sample.reserve = since(start);
  start = Clock::now();
  const uint64_t pages = bytes / (4 * kKiB);
  run_on_threads(threads, [&](unsigned t) {
    auto* base = static_cast<volatile char*>(data);
    const Share share = share_of(pages, t, threads);
    for (uint64_t page = share.first; page < share.last; ++page) base[page * 4 * kKiB] = 1;
  });
  sample.fault = since(start);
  munmap(data, bytes);
  return sample;
}

HostPinRow summarize_row(std::string method, unsigned threads, uint64_t page_size, const std::vector<Sample>& samples) {
  HostPinRow row;
  row.method = std::move(method);
  row.threads = threads;
  row.page_size = page_size;
  std::vector<double> reserve, fault, verify, total;
  for (const Sample& s : samples) {
    reserve.push_back(s.reserve);
    fault.push_back(s.fault);
    verify.push_back(s.verify);
    total.push_back(s.reserve + s.fault + s.verify);
  }
  row.reserve = summarize(reserve);
  row.fault = summarize(fault);
  row.verify = summarize(verify);
  row.total = summarize(total);
  return row;
}

}  // namespace

std::vector<HostPinRow> run_host_pin_bench(Os& os, const HostPinOptions& options,
                                           const std::function<void(const std::string&)>& progress) {
  std::vector<HostPinRow> rows;
  for (unsigned i = 0; i < options.warmup; ++i) {
    uint64_t ignored = 0;
    if (progress) progress(cat("warm-up ", i + 1, "/", options.warmup));
    measure_arena(os, options, options.thread_counts.back(), &ignored);
    measure_anonymous(options.bytes, options.thread_counts.back());
  }
  for (unsigned threads : options.thread_counts) {
    std::vector<Sample> arena_samples, anonymous_samples;
    uint64_t page_size = 0;
    for (unsigned i = 0; i < options.repeat; ++i) {
      if (progress) progress(cat("arena, ", threads, " threads, run ", i + 1, "/", options.repeat));
      arena_samples.push_back(measure_arena(os, options, threads, &page_size));
      if (progress) progress(cat("mmap 4K + touch, ", threads, " threads, run ", i + 1, "/", options.repeat));
      anonymous_samples.push_back(measure_anonymous(options.bytes, threads));
    }
    rows.push_back(summarize_row(cat("arena ", page_size_name(page_size)), threads, page_size, arena_samples));
    rows.push_back(summarize_row("mmap 4K + touch", threads, 4 * kKiB, anonymous_samples));
  }
  return rows;
}

}  // namespace hugepin::bench
