// What the copy-path probes share: error checks, 1 GiB regions on 2 MiB pages, random block
// pairs, and a warp-per-block copy kernel like the engine's SM kernel (without its look-ahead).
// The probes are experiments kept so their figures (docs/performance.md) can be re-measured;
// they are built with the CUDA code but are not part of hugepin.
#pragma once

#include <cuda_runtime.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

namespace probe {

inline void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "probe: %s: %s\n", what, cudaGetErrorString(status));
  std::exit(1);
}

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// `bytes` of anonymous 2 MiB pages, filled with `fill` and registered (mapped) with CUDA. Exits
// with 77 when no hugepages are reserved.
inline char* pinned_hugepages(uint64_t bytes, int fill) {
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  if (memory == MAP_FAILED) {
    std::fprintf(stderr, "probe: needs %llu MiB of 2 MiB hugepages (vm.nr_hugepages)\n",
                 static_cast<unsigned long long>(bytes >> 20));
    std::exit(77);
  }
  std::fill_n(static_cast<char*>(memory), bytes, static_cast<char>(fill));
  check(cudaHostRegister(memory, bytes, cudaHostRegisterMapped), "cudaHostRegister");
  return static_cast<char*>(memory);
}

struct Pair {
  uint64_t src;
  uint64_t dst;
};

// Every block of `blocks` once on each side, in random order: no two pairs form a run.
inline std::vector<Pair> random_pairs(uint64_t blocks, std::mt19937_64& random) {
  std::vector<uint64_t> sources(blocks), destinations(blocks);
  std::iota(sources.begin(), sources.end(), 0);
  std::iota(destinations.begin(), destinations.end(), 0);
  std::shuffle(sources.begin(), sources.end(), random);
  std::shuffle(destinations.begin(), destinations.end(), random);
  std::vector<Pair> pairs(blocks);
  for (uint64_t i = 0; i < blocks; ++i) pairs[i] = {sources[i], destinations[i]};
  return pairs;
}

// A warp per block (pieces of at most 64 KiB), 8 x 16-byte streaming loads in flight per lane.
__global__ void __launch_bounds__(1024)
    warp_copy_kernel(const char* src_base, char* dst_base, const Pair* pairs, uint64_t count, uint64_t block) {
  constexpr int kInFlight = 8;
  const unsigned lane = threadIdx.x & 31u;
  const uint64_t warp = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const uint64_t warps = (static_cast<uint64_t>(gridDim.x) * blockDim.x) >> 5;
  const uint64_t piece = block < 65536 ? block : 65536;
  const uint64_t pieces = (block + piece - 1) / piece;
  for (uint64_t unit = warp; unit < count * pieces; unit += warps) {
    const Pair pair = pairs[unit / pieces];
    const uint64_t offset = (unit % pieces) * piece;
    const uint4* src = reinterpret_cast<const uint4*>(src_base + pair.src * block + offset) + lane;
    uint4* dst = reinterpret_cast<uint4*>(dst_base + pair.dst * block + offset) + lane;
    const uint32_t vectors = static_cast<uint32_t>(piece / 16);
    for (uint32_t first = 0; first < vectors; first += 32 * kInFlight) {
      uint4 r[kInFlight];
#pragma unroll
      for (int k = 0; k < kInFlight; ++k) {
        if (first + lane + k * 32 < vectors) r[k] = __ldcs(src + k * 32);
      }
#pragma unroll
      for (int k = 0; k < kInFlight; ++k) {
        if (first + lane + k * 32 < vectors) __stcs(dst + k * 32, r[k]);
      }
      src += 32 * kInFlight;
      dst += 32 * kInFlight;
    }
  }
}

}  // namespace probe
