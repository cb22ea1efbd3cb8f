// Probe: what limits SM-driven copies between host and GPU (docs/performance.md, "Tried and
// dropped"). Two questions, on 1 GiB of scattered blocks each way:
//   1. Does the order of host addresses matter (GPU TLB reach over pinned host memory)? The same
//      pairs run in random order, sorted by host block, and sorted by device block, with 4 and 8
//      thread blocks.
//   2. How do both directions at once share the link when either side is an SM kernel? Every
//      mix of {SM kernel, cudaMemcpyBatchAsync} for loads and stores.
//   3. The engine's own kernel (dma/cuda_copy_kernels.cuh) against this probe's, the pair list
//      already on the GPU: how much of what `hugepin bench copy` loses to the probe is the kernel.
// Usage (root, a GPU, 1100 x 2 MiB hugepages): sm_traffic_probe. Prints GB/s, best of 4.
#include <cstring>
#include <functional>

#include "bench/probes/probe_support.cuh"
#include "dma/cuda_copy_kernels.cuh"

namespace {

using probe::check;
using probe::now;
using probe::Pair;

constexpr uint64_t kBytes = uint64_t{1} << 30;

struct Setup {
  char* host_src = probe::pinned_hugepages(kBytes, 1);
  char* host_dst = probe::pinned_hugepages(kBytes, 2);
  char* device_dst = nullptr;
  char* device_src = nullptr;
  cudaStream_t loads = nullptr;
  cudaStream_t stores = nullptr;
  Setup() {
    check(cudaMalloc(&device_dst, kBytes), "cudaMalloc");
    check(cudaMalloc(&device_src, kBytes), "cudaMalloc");
    check(cudaStreamCreateWithFlags(&loads, cudaStreamNonBlocking), "stream");
    check(cudaStreamCreateWithFlags(&stores, cudaStreamNonBlocking), "stream");
  }
};

// Pairs on the device, for a kernel.
Pair* upload(const std::vector<Pair>& pairs) {
  Pair* device = nullptr;
  check(cudaMalloc(&device, pairs.size() * sizeof(Pair)), "cudaMalloc");
  check(cudaMemcpy(device, pairs.data(), pairs.size() * sizeof(Pair), cudaMemcpyHostToDevice), "upload pairs");
  return device;
}

void batch_copy(const char* src_base, char* dst_base, const std::vector<Pair>& pairs, uint64_t block,
                cudaStream_t stream) {
  cudaMemcpyAttributes attributes{};
  attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t attribute_index = 0;
  std::vector<void*> dsts;
  std::vector<const void*> srcs;
  std::vector<size_t> sizes;
  for (size_t first = 0; first < pairs.size(); first += 8192) {
    const size_t count = std::min<size_t>(8192, pairs.size() - first);
    dsts.resize(count);
    srcs.resize(count);
    sizes.assign(count, block);
    for (size_t i = 0; i < count; ++i) {
      dsts[i] = dst_base + pairs[first + i].dst * block;
      srcs[i] = src_base + pairs[first + i].src * block;
    }
    check(cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), count, &attributes, &attribute_index, 1, stream),
          "cudaMemcpyBatchAsync");
  }
}

struct Rates {
  double load = 0, store = 0, both = 0;
};

// Best of 4 of loads alone, stores alone, and both at once.
Rates measure(Setup& s, const std::function<void()>& load, const std::function<void()>& store) {
  Rates best;
  for (int round = 0; round < 4; ++round) {
    double start = now();
    load();
    check(cudaStreamSynchronize(s.loads), "loads");
    best.load = std::max(best.load, kBytes / (now() - start) / 1e9);
    start = now();
    store();
    check(cudaStreamSynchronize(s.stores), "stores");
    best.store = std::max(best.store, kBytes / (now() - start) / 1e9);
    start = now();
    load();
    store();
    check(cudaStreamSynchronize(s.loads), "loads");
    check(cudaStreamSynchronize(s.stores), "stores");
    best.both = std::max(best.both, 2 * kBytes / (now() - start) / 1e9);
  }
  return best;
}

std::vector<Pair> reversed(const std::vector<Pair>& pairs) {
  std::vector<Pair> out(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) out[i] = {pairs[i].dst, pairs[i].src};
  return out;
}

}  // namespace

int main() {
  Setup s;
  std::mt19937_64 random(7);
  Rates contiguous = measure(
      s, [&] { check(cudaMemcpyAsync(s.device_dst, s.host_src, kBytes, cudaMemcpyHostToDevice, s.loads), "copy"); },
      [&] { check(cudaMemcpyAsync(s.host_dst, s.device_src, kBytes, cudaMemcpyDeviceToHost, s.stores), "copy"); });
  std::printf("contiguous 1 GiB: h2d %.1f  d2h %.1f  both %.1f GB/s\n\n", contiguous.load, contiguous.store,
              contiguous.both);

  std::printf("1. SM kernel, order of the pairs\n%7s %-12s %4s %7s %7s %7s\n", "BLOCK", "ORDER", "SMS", "H2D", "D2H",
              "BOTH");
  for (uint64_t block : {uint64_t{4096}, uint64_t{16384}, uint64_t{65536}}) {
    const std::vector<Pair> random_order = probe::random_pairs(kBytes / block, random);
    for (const char* order : {"random", "host-sorted", "dev-sorted"}) {
      std::vector<Pair> pairs = random_order;  // src: host block, dst: device block
      if (std::strcmp(order, "host-sorted") == 0) {
        std::sort(pairs.begin(), pairs.end(), [](Pair a, Pair b) { return a.src < b.src; });
      } else if (std::strcmp(order, "dev-sorted") == 0) {
        std::sort(pairs.begin(), pairs.end(), [](Pair a, Pair b) { return a.dst < b.dst; });
      }
      Pair* loads = upload(pairs);
      Pair* stores = upload(reversed(pairs));
      for (unsigned sms : {4u, 8u}) {
        Rates r = measure(
            s, [&] { probe::warp_copy_kernel<<<sms, 1024, 0, s.loads>>>(s.host_src, s.device_dst, loads, pairs.size(), block); },
            [&] { probe::warp_copy_kernel<<<sms, 1024, 0, s.stores>>>(s.device_src, s.host_dst, stores, pairs.size(), block); });
        check(cudaGetLastError(), "kernel");
        std::printf("%7llu %-12s %4u %7.1f %7.1f %7.1f\n", static_cast<unsigned long long>(block), order, sms, r.load,
                    r.store, r.both);
      }
      check(cudaFree(loads), "cudaFree");
      check(cudaFree(stores), "cudaFree");
    }
  }

  std::printf("\n2. both directions: SM kernel (4 SMs) or batched DMA on each side\n%7s %-5s %-5s %7s %7s %7s\n",
              "BLOCK", "H2D", "D2H", "H2D", "D2H", "BOTH");
  for (uint64_t block : {uint64_t{16384}, uint64_t{65536}, uint64_t{262144}, uint64_t{1048576}}) {
    const std::vector<Pair> pairs = probe::random_pairs(kBytes / block, random);
    const std::vector<Pair> back = reversed(pairs);
    Pair* loads = upload(pairs);
    Pair* stores = upload(back);
    for (bool load_sm : {true, false}) {
      for (bool store_sm : {true, false}) {
        Rates r = measure(
            s,
            [&] {
              if (load_sm) {
                probe::warp_copy_kernel<<<4, 1024, 0, s.loads>>>(s.host_src, s.device_dst, loads, pairs.size(), block);
              } else {
                batch_copy(s.host_src, s.device_dst, pairs, block, s.loads);
              }
            },
            [&] {
              if (store_sm) {
                probe::warp_copy_kernel<<<4, 1024, 0, s.stores>>>(s.device_src, s.host_dst, stores, back.size(), block);
              } else {
                batch_copy(s.device_src, s.host_dst, back, block, s.stores);
              }
            });
        check(cudaGetLastError(), "kernel");
        std::printf("%7llu %-5s %-5s %7.1f %7.1f %7.1f\n", static_cast<unsigned long long>(block), load_sm ? "sm" : "dma",
                    store_sm ? "sm" : "dma", r.load, r.store, r.both);
      }
    }
    check(cudaFree(loads), "cudaFree");
    check(cudaFree(stores), "cudaFree");
  }

  std::printf("\n3. the engine's kernel and this probe's, 4 SMs, pairs already on the GPU\n%7s %-7s %7s %7s %7s\n",
              "BLOCK", "KERNEL", "H2D", "D2H", "BOTH");
  for (uint64_t block : {uint64_t{4096}, uint64_t{16384}}) {
    const std::vector<Pair> pairs = probe::random_pairs(kBytes / block, random);
    const std::vector<Pair> back = reversed(pairs);
    Pair* loads = upload(pairs);
    Pair* stores = upload(back);
    // One view per direction, as the engine orients them (hugepin::UnitView, dma/copy_units.h).
    auto view_of = [&](const char* src, const char* dst) {
      hugepin::UnitView view{reinterpret_cast<uint64_t>(src), block, reinterpret_cast<uint64_t>(dst), block, block, 0};
      hugepin::UnitView* device = nullptr;
      check(cudaMalloc(&device, sizeof(view)), "cudaMalloc");
      check(cudaMemcpy(device, &view, sizeof(view), cudaMemcpyHostToDevice), "upload view");
      return device;
    };
    hugepin::UnitView* load_view = view_of(s.host_src, s.device_dst);
    hugepin::UnitView* store_view = view_of(s.device_src, s.host_dst);
    hugepin::UnitLayout layout{1, 65536, 1, pairs.size()};  // blocks of at most 64 KiB: one piece each
    static_assert(sizeof(hugepin::UnitPair) == sizeof(Pair));
    for (bool engine : {true, false}) {
      Rates r = measure(
          s,
          [&] {
            if (engine) {
              hugepin::detail::sm_load_store_kernel<<<4, 1024, 0, s.loads>>>(
                  layout, load_view, reinterpret_cast<const hugepin::UnitPair*>(loads));
            } else {
              probe::warp_copy_kernel<<<4, 1024, 0, s.loads>>>(s.host_src, s.device_dst, loads, pairs.size(), block);
            }
          },
          [&] {
            if (engine) {
              hugepin::detail::sm_load_store_kernel<<<4, 1024, 0, s.stores>>>(
                  layout, store_view, reinterpret_cast<const hugepin::UnitPair*>(stores));
            } else {
              probe::warp_copy_kernel<<<4, 1024, 0, s.stores>>>(s.device_src, s.host_dst, stores, back.size(), block);
            }
          });
      check(cudaGetLastError(), "kernel");
      std::printf("%7llu %-7s %7.1f %7.1f %7.1f\n", static_cast<unsigned long long>(block), engine ? "engine" : "probe",
                  r.load, r.store, r.both);
    }
    check(cudaFree(load_view), "cudaFree");
    check(cudaFree(store_view), "cudaFree");
    check(cudaFree(loads), "cudaFree");
    check(cudaFree(stores), "cudaFree");
  }
  return 0;
}
