#include "bench/gpu_copy_bench.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <random>

#include "base/error.h"
#include "base/size.h"
#include "bench/gpu_support.h"
#include "dma/copy_engine.h"
#include "dma/gpu_runtime.h"
#include "dma/pinning.h"

namespace hugepin::bench {
namespace {

using Clock = std::chrono::steady_clock;

// `count` pairs over `blocks` blocks on each side: random sources, distinct random destinations,
// so that no two pairs form a run (the scattered case engines see after eviction).
std::vector<BlockPair> scattered_pairs(uint64_t blocks, uint64_t count, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<uint64_t> sources(blocks), destinations(blocks);
  for (uint64_t i = 0; i < blocks; ++i) sources[i] = destinations[i] = i;
  std::shuffle(sources.begin(), sources.end(), random);
  std::shuffle(destinations.begin(), destinations.end(), random);
  std::vector<BlockPair> pairs(count);
  for (uint64_t i = 0; i < count; ++i) pairs[i] = {sources[i], destinations[i]};
  return pairs;
}

double gbps(uint64_t bytes, double seconds) { return static_cast<double>(bytes) / seconds / 1e9; }

}  // namespace

std::vector<GpuCopyRow> run_gpu_copy_bench(const GpuCopyOptions& options,
                                           const std::function<void(const std::string&)>& progress) {
  // The host side: an arena region twice the bytes moved, pinned, so blocks can scatter.
  const uint64_t pool_bytes = 2 * options.bytes;
  MappedRegion region = scratch_region("copy", pool_bytes, options.page_size, options.hugetlbfs_dir);
  GpuRuntime* runtime = cuda_runtime();
  PinOptions pin;
  pin.device = options.device;
  pin.alignment = region.page_size();
  pin.chunk_bytes = region.size();  // one registration: the contiguous ceiling copies across it
  pin.threads = 1;
  PinnedRegion pinned = pin_region(*runtime, region.data(), region.size(), pin);
  DeviceBuffer device(options.device, pool_bytes);
  std::memset(region.data(), 0x5a, region.size());
  device.fill(0x33);

  std::vector<GpuCopyRow> rows;
  for (uint64_t block : options.block_sizes) {
    const uint64_t blocks = pool_bytes / block;
    const uint64_t count = options.bytes / block;
    SegmentView view{device.address(), block, blocks, region.data(), block, blocks, block};
    CopyEngineOptions engine_options;
    engine_options.device = options.device;
    engine_options.sm_blocks = options.sm_blocks;
    engine_options.sm_slice_bytes = options.sm_slice_bytes;
    engine_options.auto_sm_below_h2d = options.auto_sm_below;
    engine_options.auto_sm_below_d2h = options.auto_sm_below;
    engine_options.host_split_base = reinterpret_cast<uintptr_t>(region.data());
    engine_options.host_split_bytes = pinned.chunk_bytes();
    auto engine = make_cuda_copy_engine({view}, engine_options);
    std::vector<BlockPair> pairs = scattered_pairs(blocks, count, block);
    const uint64_t moved = count * block;

    struct Method {
      std::string name;
      CopyBackend backend;
    };
    std::vector<Method> methods{{"per-block", CopyBackend::kDmaPerBlock}, {"batch", CopyBackend::kDmaBatch},
                                {"sm", CopyBackend::kSmLoadStore},      {"sm-bulk", CopyBackend::kSmBulk},
                                {"auto", CopyBackend::kAuto}};
    for (const char* direction : {"h2d", "d2h", "both"}) {
      const std::string dir = direction;
      auto run_contiguous = [&] {
        if (dir == "both") return contiguous_both(device.data(), region.data(), moved);
        return contiguous_copy(device.data(), region.data(), moved, dir == "h2d");
      };
      std::vector<double> contiguous;
      std::map<std::string, std::vector<double>> samples;
      for (unsigned r = 0; r < options.repeat + 1; ++r) {  // the first round warms up, unmeasured
        if (progress) progress(cat(format_bytes(block), " ", dir, " round ", r, "/", options.repeat));
        double seconds = run_contiguous();
        if (r > 0) contiguous.push_back(gbps(dir == "both" ? 2 * moved : moved, seconds));
        for (const Method& method : methods) {
          auto start = Clock::now();
          if (dir == "both") {
            auto load = engine->launch(Direction::kHostToDevice, pairs, method.backend);
            auto store = engine->launch(Direction::kDeviceToHost, pairs, method.backend);
            load->wait();
            store->wait();
          } else {
            engine->launch(dir == "h2d" ? Direction::kHostToDevice : Direction::kDeviceToHost, pairs, method.backend)
                ->wait();
          }
          double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
          if (r > 0) samples[method.name].push_back(gbps(dir == "both" ? 2 * moved : moved, elapsed));
        }
      }
      rows.push_back({block, dir, "contiguous", summarize(contiguous)});
      for (const Method& method : methods) {
        std::string label = method.name;
        if (method.backend == CopyBackend::kAuto) {
          label = cat("auto(", backend_name(engine->auto_backend(dir == "d2h" ? Direction::kDeviceToHost
                                                                              : Direction::kHostToDevice)),
                      ")");
        }
        rows.push_back({block, dir, label, summarize(samples[method.name])});
      }
    }
  }
  return rows;
}

}  // namespace hugepin::bench
