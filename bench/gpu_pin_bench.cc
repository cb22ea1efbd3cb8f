#include "bench/gpu_pin_bench.h"

#include <cuda_runtime_api.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <thread>

#include "base/error.h"
#include "base/parallel.h"
#include "base/size.h"
#include "dma/cuda_check.h"
#include "dma/gpu_runtime.h"
#include "dma/pinning.h"
#include "hugemem/arena.h"

namespace hugepin::bench {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct Sample {
  double prepare = 0;
  double registration = 0;
  size_t chunks = 0;
};

ArenaOptions arena_options(const GpuPinOptions& options) {
  ArenaOptions arena;
  arena.page_size = options.page_size;
  arena.strict = true;  // a hugepage benchmark must not quietly run on 4 KiB pages
  arena.hugetlbfs_dir = options.hugetlbfs_dir;
  return arena;
}

// Attach (map the region by name) and pin it: what a restarted worker does.
Sample attach_and_pin(const GpuPinOptions& options, const std::string& name) {
  Sample sample;
  auto start = Clock::now();
  MappedRegion region = open_region(real_os(), name, 0, true, arena_options(options));
  sample.prepare = since(start);
  start = Clock::now();
  PinOptions pin;
  pin.device = options.device;
  pin.alignment = region.page_size();
  pin.chunk_bytes = options.chunk_bytes;
  pin.threads = options.pin_threads;
  PinnedRegion pinned = pin_region(*cuda_runtime(), region.data(), region.size(), pin);
  sample.registration = since(start);
  sample.chunks = pinned.chunks();
  return sample;
}

Sample arena_cold(const GpuPinOptions& options, const std::string& name) {
  auto start = Clock::now();
  create_arena(real_os(), name, {{0, options.bytes, -1}}, arena_options(options));
  double created = since(start);
  Sample sample = attach_and_pin(options, name);
  sample.prepare += created;
  return sample;
}

Sample bare_register(const GpuPinOptions& options, const std::string& name) {
  MappedRegion region = open_region(real_os(), name, 0, true, arena_options(options));
  Sample sample;
  auto start = Clock::now();
  check_cuda(cudaHostRegister(region.data(), region.size(), cudaHostRegisterPortable | cudaHostRegisterMapped),
        "cudaHostRegister");
  sample.registration = since(start);
  sample.chunks = 1;
  check_cuda(cudaHostUnregister(region.data()), "cudaHostUnregister");
  return sample;
}

Sample host_alloc(uint64_t bytes) {
  Sample sample;
  void* memory = nullptr;
  auto start = Clock::now();
  check_cuda(cudaHostAlloc(&memory, bytes, cudaHostAllocPortable | cudaHostAllocMapped),
        cat("cudaHostAlloc of ", format_bytes(bytes)));
  sample.registration = since(start);
  check_cuda(cudaFreeHost(memory), "cudaFreeHost");
  return sample;
}

// Anonymous 4 KiB memory touched by every CPU, then registered: torch.zeros + cudaHostRegister.
Sample small_pages_register(uint64_t bytes) {
  Sample sample;
  auto start = Clock::now();
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) throw_errno(cat("mmap of ", format_bytes(bytes)), errno);
  madvise(memory, bytes, MADV_NOHUGEPAGE);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const uint64_t pages = bytes / 4096;
  run_on_threads(threads, [&](unsigned t) {
    auto* base = static_cast<volatile char*>(memory);
    const Share share = share_of(pages, t, threads);
    for (uint64_t p = share.first; p < share.last; ++p) base[p * 4096] = 0;
  });
  sample.prepare = since(start);
  start = Clock::now();
  cudaError_t error = cudaHostRegister(memory, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped);
  sample.registration = since(start);
  if (error == cudaSuccess) cudaHostUnregister(memory);
  munmap(memory, bytes);
  check_cuda(error, cat("cudaHostRegister of ", format_bytes(bytes), " of 4 KiB pages"));
  return sample;
}

GpuPinRow to_row(const std::string& method, const std::vector<Sample>& samples) {
  std::vector<double> total, prepare, registration;
  for (const Sample& s : samples) {
    total.push_back(s.prepare + s.registration);
    prepare.push_back(s.prepare);
    registration.push_back(s.registration);
  }
  return {method, summarize(total), summarize(prepare), summarize(registration),
          samples.empty() ? 0 : samples.front().chunks};
}

}  // namespace

std::vector<GpuPinRow> run_gpu_pin_bench(const GpuPinOptions& options,
                                         const std::function<void(const std::string&)>& progress) {
  check_cuda(cudaSetDevice(options.device), "selecting the GPU");
  check_cuda(cudaFree(nullptr), "creating the CUDA context");  // context creation is not pinning time
  std::map<std::string, std::vector<Sample>> samples;
  const std::string name = cat("bench-pin-gpu-", getpid());
  auto want = [&](const char* method) { return options.methods.count(method) != 0; };
  for (unsigned r = 0; r < options.repeat; ++r) {
    auto say = [&](const char* what) {
      if (progress) progress(cat(what, " ", format_bytes(options.bytes), ", run ", r + 1, "/", options.repeat));
    };
    if (want("arena-cold") || want("arena-warm") || want("bare-register")) {
      say("arena cold");
      Sample cold = arena_cold(options, name);
      if (want("arena-cold")) samples["arena-cold"].push_back(cold);
      try {
        if (want("arena-warm")) {
          say("arena warm");
          samples["arena-warm"].push_back(attach_and_pin(options, name));
        }
        if (want("bare-register")) {
          say("bare register");
          samples["bare-register"].push_back(bare_register(options, name));
        }
      } catch (...) {
        destroy_arena(real_os(), name, arena_options(options));
        throw;
      }
      destroy_arena(real_os(), name, arena_options(options));
    }
    if (want("cudaHostAlloc")) {
      say("cudaHostAlloc");
      samples["cudaHostAlloc"].push_back(host_alloc(options.bytes));
    }
    if (want("4k-register")) {
      say("4 KiB + register");
      samples["4k-register"].push_back(small_pages_register(options.bytes));
    }
  }
  std::vector<GpuPinRow> rows;
  for (const char* method : {"arena-cold", "arena-warm", "bare-register", "cudaHostAlloc", "4k-register"}) {
    if (samples.count(method)) rows.push_back(to_row(method, samples[method]));
  }
  return rows;
}

}  // namespace hugepin::bench
