// Probe: can scattered small blocks reach the contiguous DMA rate through staging buffers? CPU
// threads gather host blocks into a pinned staging buffer, one contiguous cudaMemcpyAsync moves
// it, and a 4-SM kernel scatters it into device blocks (and the reverse for stores), pipelined
// over `slots` buffers. The SM path plateaus near 92% of the link and the DMA engine needs large
// copies (docs/performance.md); this moves the scatter to each side's own memory. Measured on the
// H200 host it did not pay: the host's memory bandwidth, not the link, limits it (docs/performance.md,
// "Tried and dropped").
// Usage (root, a GPU, 1100 x 2 MiB hugepages): staged_copy_probe [SLOT_MIB=8] [SLOTS=4]
// Prints GB/s per block size and thread count, best of 3, and checks every block.
#include <atomic>
#include <cstring>
#include <thread>

#include "bench/probes/probe_support.cuh"

namespace {

using probe::check;
using probe::now;
using probe::Pair;

constexpr uint64_t kBytes = uint64_t{1} << 30;

// Moves a block list between a staging buffer and scattered host blocks on `threads` threads
// (the caller's among them), one even share each.
class GatherPool {
 public:
  explicit GatherPool(unsigned threads) : threads_(threads) {
    for (unsigned t = 1; t < threads_; ++t) workers_.emplace_back([this, t] { work(t); });
  }
  ~GatherPool() {
    stop_.store(true);
    generation_.fetch_add(1, std::memory_order_release);
    for (std::thread& worker : workers_) worker.join();
  }
  GatherPool(const GatherPool&) = delete;
  GatherPool& operator=(const GatherPool&) = delete;

  // gather: stage[i] = host[blocks[i]]; else host[blocks[i]] = stage[i]. Returns when done.
  void run(char* stage, char* host, const uint64_t* blocks, uint64_t count, uint64_t block, bool gather) {
    job_ = {stage, host, blocks, count, block, gather};
    pending_.store(threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);  // pairs with the acquire in work()
    share(0);
    while (pending_.load(std::memory_order_acquire) != 0) {
    }
  }

 private:
  struct Job {
    char* stage;
    char* host;
    const uint64_t* blocks;
    uint64_t count;
    uint64_t block;
    bool gather;
  };

  void share(unsigned t) {
    const uint64_t first = job_.count * t / threads_;
    const uint64_t end = job_.count * (t + 1) / threads_;
    for (uint64_t i = first; i < end; ++i) {
      char* staged = job_.stage + i * job_.block;
      char* scattered = job_.host + job_.blocks[i] * job_.block;
      if (job_.gather) {
        std::memcpy(staged, scattered, job_.block);
      } else {
        std::memcpy(scattered, staged, job_.block);
      }
    }
  }

  // Spins: the probe measures the copy, not wake-up latency.
  void work(unsigned t) {
    uint64_t seen = 0;
    for (;;) {
      uint64_t current;
      while ((current = generation_.load(std::memory_order_acquire)) == seen) {
      }
      if (stop_.load()) return;
      seen = current;
      share(t);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  const unsigned threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<unsigned> pending_{0};
  std::atomic<bool> stop_{false};
  Job job_{};
};

// Scatters staged blocks to device blocks (to_blocks) or gathers them into the stage.
__global__ void stage_kernel(char* stage, char* base, const uint64_t* blocks, uint64_t count, uint64_t block,
                             bool to_blocks) {
  const uint64_t vectors_per_block = block / 16;
  const uint64_t lanes = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t v = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < count * vectors_per_block;
       v += lanes) {
    const uint64_t i = v / vectors_per_block;
    const uint64_t offset = v - i * vectors_per_block;
    uint4* staged = reinterpret_cast<uint4*>(stage + i * block) + offset;
    uint4* scattered = reinterpret_cast<uint4*>(base + blocks[i] * block) + offset;
    if (to_blocks) {
      __stcs(scattered, __ldcs(staged));
    } else {
      __stcs(staged, __ldcs(scattered));
    }
  }
}

// One direction's pipeline: `slots` pinned host buffers and as many device buffers.
class StagedDirection {
 public:
  StagedDirection(bool load, unsigned slots, uint64_t slot_bytes) : load_(load), slot_bytes_(slot_bytes) {
    for (unsigned i = 0; i < slots; ++i) {
      Slot slot;
      check(cudaHostAlloc(&slot.host, slot_bytes, 0), "cudaHostAlloc");
      check(cudaMalloc(&slot.device, slot_bytes), "cudaMalloc");
      check(cudaEventCreateWithFlags(&slot.copied, cudaEventDisableTiming), "event");
      check(cudaEventCreateWithFlags(&slot.kernel_done, cudaEventDisableTiming), "event");
      slots_.push_back(slot);
    }
    int least = 0, greatest = 0;
    check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "priorities");
    check(cudaStreamCreateWithPriority(&copies_, cudaStreamNonBlocking, least), "stream");
    check(cudaStreamCreateWithPriority(&kernels_, cudaStreamNonBlocking, least), "stream");
  }

  // host_blocks[i] <-> device_blocks[i] (device_blocks lives on the GPU), for i < count.
  void run(GatherPool& pool, char* host, char* device, const uint64_t* host_blocks, const uint64_t* device_blocks,
           uint64_t count, uint64_t block) {
    const uint64_t per_slot = slot_bytes_ / block;
    const uint64_t chunks = (count + per_slot - 1) / per_slot;
    const uint64_t slots = slots_.size();
    auto span = [&](uint64_t k, uint64_t* first) {
      *first = k * per_slot;
      return std::min(per_slot, count - *first);
    };
    if (load_) {
      for (uint64_t k = 0; k < chunks; ++k) {
        Slot& slot = slots_[k % slots];
        uint64_t first = 0;
        const uint64_t n = span(k, &first);
        if (k >= slots) check(cudaEventSynchronize(slot.copied), "wait for a staging buffer");
        pool.run(slot.host, host, host_blocks + first, n, block, /*gather=*/true);
        if (k >= slots) check(cudaStreamWaitEvent(copies_, slot.kernel_done), "wait");
        check(cudaMemcpyAsync(slot.device, slot.host, n * block, cudaMemcpyHostToDevice, copies_), "copy");
        check(cudaEventRecord(slot.copied, copies_), "record");
        check(cudaStreamWaitEvent(kernels_, slot.copied), "wait");
        stage_kernel<<<4, 1024, 0, kernels_>>>(slot.device, device, device_blocks + first, n, block, true);
        check(cudaEventRecord(slot.kernel_done, kernels_), "record");
      }
      check(cudaStreamSynchronize(kernels_), "loads");
      return;
    }
    auto enqueue = [&](uint64_t k) {
      Slot& slot = slots_[k % slots];
      uint64_t first = 0;
      const uint64_t n = span(k, &first);
      if (k >= slots) check(cudaStreamWaitEvent(kernels_, slot.copied), "wait");
      stage_kernel<<<4, 1024, 0, kernels_>>>(slot.device, device, device_blocks + first, n, block, false);
      check(cudaEventRecord(slot.kernel_done, kernels_), "record");
      check(cudaStreamWaitEvent(copies_, slot.kernel_done), "wait");
      check(cudaMemcpyAsync(slot.host, slot.device, n * block, cudaMemcpyDeviceToHost, copies_), "copy");
      check(cudaEventRecord(slot.copied, copies_), "record");
    };
    auto scatter = [&](uint64_t k) {
      Slot& slot = slots_[k % slots];
      uint64_t first = 0;
      const uint64_t n = span(k, &first);
      check(cudaEventSynchronize(slot.copied), "wait for a staging buffer");
      pool.run(slot.host, host, host_blocks + first, n, block, /*gather=*/false);
    };
    for (uint64_t k = 0; k < chunks; ++k) {
      if (k >= slots) scatter(k - slots);
      enqueue(k);
    }
    for (uint64_t k = chunks > slots ? chunks - slots : 0; k < chunks; ++k) scatter(k);
  }

 private:
  struct Slot {
    char* host = nullptr;
    char* device = nullptr;
    cudaEvent_t copied = nullptr;       // the DMA of this slot finished
    cudaEvent_t kernel_done = nullptr;  // the kernel of this slot finished
  };
  const bool load_;
  const uint64_t slot_bytes_;
  std::vector<Slot> slots_;
  cudaStream_t copies_ = nullptr;
  cudaStream_t kernels_ = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  const uint64_t slot_bytes = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 8) << 20;
  const unsigned slots = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 4;
  if (slot_bytes == 0 || slots == 0) {
    std::fprintf(stderr, "usage: staged_copy_probe [SLOT_MIB>0] [SLOTS>0]\n");
    return 2;
  }
  char* host_src = probe::pinned_hugepages(kBytes, 0);
  char* host_dst = probe::pinned_hugepages(kBytes, 0);
  std::mt19937_64 random(1);
  for (uint64_t i = 0; i < kBytes / 8; ++i) reinterpret_cast<uint64_t*>(host_src)[i] = random();
  char *device_dst = nullptr, *device_src = nullptr;
  check(cudaMalloc(&device_dst, kBytes), "cudaMalloc");
  check(cudaMalloc(&device_src, kBytes), "cudaMalloc");
  check(cudaMemset(device_src, 0x5a, kBytes), "cudaMemset");
  std::printf("staging: %u buffers of %llu MiB per direction\n", slots, static_cast<unsigned long long>(slot_bytes >> 20));

  StagedDirection loads(true, slots, slot_bytes), stores(false, slots, slot_bytes);
  std::printf("%7s %7s %7s %7s %7s %s\n", "BLOCK", "THREADS", "H2D", "D2H", "BOTH", "BAD BLOCKS");
  for (uint64_t block : {uint64_t{4096}, uint64_t{16384}, uint64_t{65536}, uint64_t{262144}}) {
    const uint64_t count = kBytes / block;
    std::vector<Pair> pairs = probe::random_pairs(count, random);
    std::vector<uint64_t> host_blocks(count), device_blocks(count);
    for (uint64_t i = 0; i < count; ++i) {
      host_blocks[i] = pairs[i].src;
      device_blocks[i] = pairs[i].dst;
    }
    uint64_t* device_list = nullptr;
    check(cudaMalloc(&device_list, count * 8), "cudaMalloc");
    check(cudaMemcpy(device_list, device_blocks.data(), count * 8, cudaMemcpyHostToDevice), "upload");
    for (unsigned threads : {2u, 4u, 8u}) {
      GatherPool load_pool(threads), store_pool(threads);
      double load = 0, store = 0, both = 0;
      auto run_load = [&] { loads.run(load_pool, host_src, device_dst, host_blocks.data(), device_list, count, block); };
      auto run_store = [&] { stores.run(store_pool, host_dst, device_src, host_blocks.data(), device_list, count, block); };
      for (int round = 0; round < 3; ++round) {
        double start = now();
        run_load();
        load = std::max(load, kBytes / (now() - start) / 1e9);
        start = now();
        run_store();
        store = std::max(store, kBytes / (now() - start) / 1e9);
        start = now();
        std::thread other(run_load);
        run_store();
        other.join();
        both = std::max(both, 2 * kBytes / (now() - start) / 1e9);
      }
      // Every block where it belongs: device_dst[d] == host_src[h], host_dst[h] == device_src[d].
      std::vector<char> back(kBytes);
      uint64_t bad = 0;
      check(cudaMemcpy(back.data(), device_dst, kBytes, cudaMemcpyDeviceToHost), "read back");
      for (uint64_t i = 0; i < count; ++i) {
        bad += std::memcmp(back.data() + device_blocks[i] * block, host_src + host_blocks[i] * block, block) != 0;
      }
      check(cudaMemcpy(back.data(), device_src, kBytes, cudaMemcpyDeviceToHost), "read back");
      for (uint64_t i = 0; i < count; ++i) {
        bad += std::memcmp(back.data() + device_blocks[i] * block, host_dst + host_blocks[i] * block, block) != 0;
      }
      std::printf("%7llu %7u %7.1f %7.1f %7.1f %llu\n", static_cast<unsigned long long>(block), threads, load, store,
                  both, static_cast<unsigned long long>(bad));
      std::fflush(stdout);
    }
    check(cudaFree(device_list), "cudaFree");
  }
  return 0;
}
