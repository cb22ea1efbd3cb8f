// A TP=2 offload through libhugepin's C++ API (hugepin/hugepin.hpp), each worker rank in its own
// process: the scheduler creates the arena, dispatches stores and loads over chunks and sends
// them to the workers over pipes (the engine's own channel); the workers copy, learn that their
// copies landed through their completion descriptor, and check every byte. Then retire, the
// fence, and reuse of the chunks by a second round of stores. Exit status 0 when every check held.
//
// Usage: offload_cpp [--page-size 4K|2M|1G]    (a GPU build pins and uses GPU 0)
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <hugepin/hugepin.hpp>

#ifdef HUGEPIN_EXAMPLE_CUDA
#include <cuda_runtime.h>
#endif

namespace {

constexpr uint32_t kTp = 2;
constexpr uint64_t kDeviceBlocks = 32;
constexpr uint64_t kBlockBytes = 1024;  // one segment per rank: bytes_per_block in the plan

struct Job {
  int32_t store;  // 1: store, 0: load, -1: stop
  uint32_t chunk;
  uint64_t job;
  uint64_t version;
};

uint8_t pattern(uint32_t rank, uint32_t chunk, uint64_t version, uint64_t i) {
  uint64_t x = (uint64_t{rank} << 56) ^ (uint64_t{chunk} << 32) ^ (version << 16) ^ i;
  x ^= x >> 31;
  x *= 0x9e3779b97f4a7c15ULL;
  return static_cast<uint8_t>(x >> 40);
}

void copy_to_device(uint8_t* device, const uint8_t* host, size_t bytes) {
#ifdef HUGEPIN_EXAMPLE_CUDA
  if (cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) throw std::runtime_error("cudaMemcpy");
#else
  std::memcpy(device, host, bytes);
#endif
}

void copy_from_device(uint8_t* host, const uint8_t* device, size_t bytes) {
#ifdef HUGEPIN_EXAMPLE_CUDA
  if (cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) throw std::runtime_error("cudaMemcpy");
#else
  std::memcpy(host, device, bytes);
#endif
}

// One rank: every job copies one chunk between host blocks and device blocks 0 .. bpc - 1.
int run_worker(const std::string& arena, uint32_t rank, int channel) {
  hugepin::WorkerSession worker = hugepin::WorkerSession::attach(arena, rank, 0);
  const hugepin_arena_info info = hugepin::arena_info(arena);
  const hugepin_region_info region = worker.region();
  const hugepin_segment_info host = worker.segment(0);
  uint8_t* device = nullptr;
#ifdef HUGEPIN_EXAMPLE_CUDA
  worker.pin(0);
  if (cudaMalloc(reinterpret_cast<void**>(&device), kDeviceBlocks * kBlockBytes) != cudaSuccess) return 1;
#else
  std::vector<uint8_t> device_memory(kDeviceBlocks * kBlockBytes);
  device = device_memory.data();
#endif
  worker.set_device_kv({hugepin_device_segment{reinterpret_cast<uintptr_t>(device), kBlockBytes, kDeviceBlocks,
                                               host.bytes_per_block}});
  const int landed_fd = worker.completion_fd();
  std::vector<uint8_t> bytes(info.blocks_per_chunk * kBlockBytes);
  for (Job job{}; read(channel, &job, sizeof job) == sizeof job && job.store >= 0;) {
    std::vector<hugepin_block_pair> pairs;
    for (uint64_t b = 0; b < info.blocks_per_chunk; ++b) {
      const uint64_t host_block = job.chunk * info.blocks_per_chunk + b;
      pairs.push_back(job.store ? hugepin_block_pair{b, host_block} : hugepin_block_pair{host_block, b});
    }
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = job.store ? pattern(rank, job.chunk, job.version, i) : 0;
    copy_to_device(device, bytes.data(), bytes.size());
    if (job.store) {
      worker.store(job.job, pairs);
    } else {
      worker.load(job.job, pairs);
    }
    pollfd ready{landed_fd, POLLIN, 0};  // woken when the copies land, as an event loop would be
    bool landed = false;
    while (!landed && poll(&ready, 1, 10000) == 1) {
      uint64_t count = 0;
      if (read(landed_fd, &count, sizeof count) < 0) return 1;
      for (const hugepin_job_result& result : worker.finished()) landed = landed || result.job == job.job;
    }
    if (!landed) return 1;
    const uint8_t* checked = static_cast<const uint8_t*>(region.base) + host.host_offset +
                             job.chunk * info.blocks_per_chunk * host.host_block_stride;
    if (!job.store) {
      copy_from_device(bytes.data(), device, bytes.size());
      checked = bytes.data();
    }
    char ok = 'y';
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (checked[i] != pattern(rank, job.chunk, job.version, i)) {
        std::cerr << "offload_cpp: rank " << rank << ": chunk " << job.chunk << " byte " << i << " is wrong after a "
                  << (job.store ? "store" : "load") << "\n";
        ok = 'n';
        break;
      }
    }
    if (write(channel, &ok, 1) != 1 || ok != 'y') return 1;
  }
  worker.detach();
  return 0;
}

std::string plan_json(const std::string& page_size) {
  std::string ranks;
  for (uint32_t r = 0; r < kTp; ++r) {
    ranks += std::string(r ? ", " : "") + "{\"tp_rank\": " + std::to_string(r) + ", \"pp_rank\": 0, \"num_blocks\": " +
             std::to_string(kDeviceBlocks) + ", \"bytes_per_block\": " + std::to_string(kBlockBytes) + "}";
  }
  return "{\"tp\": 2, \"pp\": 1, \"blocks_per_chunk\": 8, \"cpu_bytes\": 131072, \"page_size\": \"" + page_size +
         "\", \"ranks\": [" + ranks + "]}";
}

class Engine {
 public:
  Engine(hugepin::SchedulerSession& scheduler, const std::vector<int>& channels)
      : scheduler_(scheduler), channels_(channels) {}

  // Dispatches one job over `chunk`, sends it to every rank, waits for the quorum.
  void run(hugepin_job_kind kind, uint32_t chunk, uint64_t version) {
    const hugepin_job_id id = scheduler_.dispatch(kind, std::vector<hugepin_chunk_id>{chunk});
    const Job job{kind == HUGEPIN_STORE ? 1 : 0, chunk, id, version};
    for (int channel : channels_) {
      char ok = 0;
      if (write(channel, &job, sizeof job) != sizeof job || read(channel, &ok, 1) != 1 || ok != 'y') {
        throw std::runtime_error("a worker failed its check (see above)");
      }
    }
    for (int i = 0; i < 1000; ++i) {
      scheduler_.drain(10'000'000);
      for (hugepin_job_id done : scheduler_.completed()) {
        if (done == id) return;
      }
      for (const hugepin_failed_job& failed : scheduler_.failed()) throw std::runtime_error(failed.message);
    }
    throw std::runtime_error("job " + std::to_string(id) + " did not reach quorum in 10 s");
  }

 private:
  hugepin::SchedulerSession& scheduler_;
  std::vector<int> channels_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string page_size = "4K";
  if (argc == 3 && std::string(argv[1]) == "--page-size") {
    page_size = argv[2];
  } else if (argc != 1) {
    std::cerr << "usage: " << argv[0] << " [--page-size 4K|2M|1G]\n";
    return 2;
  }
  const std::string arena = "example-cpp-" + std::to_string(getpid());
  try {
    hugepin::Plan plan = hugepin::Plan::from_json(plan_json(page_size));
    hugepin::SchedulerSession scheduler = hugepin::SchedulerSession::create(arena, plan);
    const uint32_t chunks = scheduler.info().chunk_count;
    std::vector<int> channels;
    std::vector<pid_t> pids;
    std::cout.flush();
    for (uint32_t rank = 0; rank < kTp; ++rank) {
      int fds[2];
      if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) throw std::runtime_error("socketpair");
      const pid_t pid = fork();
      if (pid == 0) {
        close(fds[0]);
        int status = 1;
        try {
          status = run_worker(arena, rank, fds[1]);
        } catch (const std::exception& error) {
          std::cerr << "offload_cpp: rank " << rank << ": " << error.what() << "\n";
        }
        _exit(status);  // the scheduler session is the parent's: no destructors here
      }
      close(fds[1]);
      channels.push_back(fds[0]);
      pids.push_back(pid);
    }
    Engine engine(scheduler, channels);
    for (uint32_t c = 0; c < chunks; ++c) engine.run(HUGEPIN_STORE, c, 1);
    for (uint32_t c = 0; c < chunks; ++c) engine.run(HUGEPIN_LOAD, c, 1);
    std::cout << "stored and loaded " << chunks << " chunks on " << kTp << " ranks, every byte checked\n";

    // Retire everything: the chunks come back only through the fence, which waits for every rank
    // to release epoch 1. These workers never release it: they detach and exit, and a rank whose
    // process is gone leaves the fence.
    for (uint32_t c = 0; c < chunks; ++c) scheduler.retire(c);
    scheduler.begin_epoch();
    scheduler.drain(0);
    if (!scheduler.reusable().empty()) throw std::runtime_error("chunks reusable before the ranks released");
    std::cout << "retired " << chunks << " chunks: none reusable before the ranks release epoch 1 (fence)\n";

    for (int channel : channels) {
      const Job stop{-1, 0, 0, 0};
      if (write(channel, &stop, sizeof stop) != sizeof stop) throw std::runtime_error("stopping a worker");
    }
    int failed = 0;
    for (pid_t pid : pids) {
      int status = 0;
      waitpid(pid, &status, 0);
      failed += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    // The workers detached and exited: drain() notices the processes are gone (at each wait that
    // ends without progress, 10 ms here), their ranks leave the fence, and the chunks come back.
    size_t reusable = 0;
    for (int i = 0; i < 500 && reusable < chunks; ++i) {
      scheduler.drain(10'000'000);
      reusable += scheduler.reusable().size();
    }
    std::cout << "workers detached: " << reusable << " chunks reusable\n";
    if (failed != 0 || reusable != chunks) throw std::runtime_error("a worker failed, or chunks stayed retired");
  } catch (const hugepin::Error& error) {
    std::cerr << "offload_cpp: " << error.what() << " (" << error.code() << ")\n";
    return 1;
  } catch (const std::exception& error) {
    std::cerr << "offload_cpp: " << error.what() << "\n";
    return 1;
  }
  std::cout << "offload_cpp: OK\n";
  return 0;
}
