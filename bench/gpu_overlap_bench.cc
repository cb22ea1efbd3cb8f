#include "bench/gpu_overlap_bench.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/error.h"
#include "base/size.h"
#include "bench/gpu_support.h"
#include "dma/copy_engine.h"
#include "dma/cuda_check.h"
#include "dma/gpu_runtime.h"
#include "dma/pinning.h"

namespace hugepin::bench {
namespace {

// cuBLAS, loaded at run time so that hugepin itself never needs it.
class Cublas {
 public:
  Cublas() {
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so.13",
                             "/usr/local/cuda/lib64/libcublas.so"}) {
      library_ = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (library_ != nullptr) break;
    }
    if (library_ == nullptr) throw Error("bench overlap needs libcublas (CUDA Toolkit); none could be loaded");
    create_ = load<decltype(create_)>("cublasCreate_v2");
    destroy_ = load<decltype(destroy_)>("cublasDestroy_v2");
    set_stream_ = load<decltype(set_stream_)>("cublasSetStream_v2");
    gemm_ = load<decltype(gemm_)>("cublasGemmEx");
    if (create_(&handle_) != CUBLAS_STATUS_SUCCESS) throw Error("cublasCreate failed");
  }
  ~Cublas() {
    if (handle_ != nullptr) destroy_(handle_);
  }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;

  // C = A * B, all n x n bf16, fp32 accumulation, on `stream`.
  void matmul(cudaStream_t stream, int n, const void* a, const void* b, void* c) {
    set_stream_(handle_, stream);
    const float one = 1.0f;
    const float zero = 0.0f;
    cublasStatus_t status = gemm_(handle_, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b, CUDA_R_16BF, n,
                                  &zero, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (status != CUBLAS_STATUS_SUCCESS) throw Error(cat("cublasGemmEx failed with status ", static_cast<int>(status)));
  }

 private:
  template <typename F>
  F load(const char* symbol) {
    void* address = dlsym(library_, symbol);
    if (address == nullptr) throw Error(cat("libcublas has no ", symbol));
    return reinterpret_cast<F>(address);
  }

  void* library_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  cublasStatus_t (*create_)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*destroy_)(cublasHandle_t) = nullptr;
  cublasStatus_t (*set_stream_)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*gemm_)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
                          cudaDataType, int, const void*, cudaDataType, int, const void*, void*, cudaDataType, int,
                          cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
};

// TFLOP/s of `count` matmuls, timed with events on `stream`.
double matmul_rate(Cublas& cublas, cudaStream_t stream, const OverlapOptions& options, DeviceBuffer& a,
                   DeviceBuffer& b, DeviceBuffer& c) {
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  check_cuda(cudaEventCreate(&start), "event");
  check_cuda(cudaEventCreate(&stop), "event");
  const int n = static_cast<int>(options.matmul_size);
  check_cuda(cudaEventRecord(start, stream), "record");
  for (unsigned i = 0; i < options.matmuls_per_sample; ++i) cublas.matmul(stream, n, a.data(), b.data(), c.data());
  check_cuda(cudaEventRecord(stop, stream), "record");
  check_cuda(cudaEventSynchronize(stop), "sync");
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, start, stop), "elapsed");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  const double flops = 2.0 * n * static_cast<double>(n) * n * options.matmuls_per_sample;
  return flops / (ms / 1000.0) / 1e12;
}

}  // namespace

std::vector<OverlapRow> run_overlap_bench(const OverlapOptions& options,
                                          const std::function<void(const std::string&)>& progress) {
  Cublas cublas;
  check_cuda(cudaSetDevice(options.device), "selecting the GPU");
  const uint64_t matrix = uint64_t{options.matmul_size} * options.matmul_size * 2;
  DeviceBuffer a(options.device, matrix), b(options.device, matrix), c(options.device, matrix);
  a.fill(0x3c);  // bf16 ~1.2: finite values throughout
  b.fill(0x3c);
  cudaStream_t compute = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), "stream");

  // Copy side: a pinned region and device blocks, twice the bytes of one launch per direction.
  const uint64_t pool = 2 * options.copy_bytes;
  MappedRegion region = scratch_region("overlap", pool, options.page_size, options.hugetlbfs_dir);
  PinOptions pin;
  pin.device = options.device;
  pin.alignment = region.page_size();
  PinnedRegion pinned = pin_region(*cuda_runtime(), region.data(), region.size(), pin);
  DeviceBuffer blocks(options.device, pool);
  const uint64_t count = options.copy_bytes / options.block_bytes;
  const uint64_t half_blocks = count;  // loads use the first half of each side, stores the second
  std::byte* host = region.data();
  SegmentView loads_view{blocks.address(), options.block_bytes, half_blocks, host, options.block_bytes, half_blocks,
                         options.block_bytes};
  SegmentView stores_view{blocks.address() + options.copy_bytes, options.block_bytes, half_blocks,
                          host + options.copy_bytes, options.block_bytes, half_blocks, options.block_bytes};
  CopyEngineOptions engine_options;
  engine_options.device = options.device;
  engine_options.sm_blocks = options.sm_blocks;
  engine_options.sm_slice_bytes = options.sm_slice_bytes;
  engine_options.host_split_base = reinterpret_cast<uintptr_t>(pinned.host());
  engine_options.host_split_bytes = pinned.chunk_bytes();
  auto loads = make_cuda_copy_engine({loads_view}, engine_options);
  auto stores = make_cuda_copy_engine({stores_view}, engine_options);
  std::vector<BlockPair> pairs(count);
  for (uint64_t i = 0; i < count; ++i) pairs[i] = {(i * 7919) % count, (i * 104729) % count};  // scattered, distinct

  std::vector<double> alone;
  matmul_rate(cublas, compute, options, a, b, c);  // warm-up
  for (unsigned r = 0; r < options.repeat; ++r) {
    if (progress) progress(cat("matmul alone ", r + 1, "/", options.repeat));
    alone.push_back(matmul_rate(cublas, compute, options, a, b, c));
  }
  std::vector<OverlapRow> rows;
  rows.push_back({"none", summarize(alone), 0, 0});

  for (CopyBackend backend : {CopyBackend::kDmaBatch, CopyBackend::kSmLoadStore, CopyBackend::kSmBulk, CopyBackend::kAuto}) {
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> moved{0};
    std::exception_ptr failure;
    auto start = std::chrono::steady_clock::now();
    std::thread copier([&] {
      try {
        cudaSetDevice(options.device);
        while (!stop.load()) {
          auto load = loads->launch(Direction::kHostToDevice, pairs, backend);
          auto store = stores->launch(Direction::kDeviceToHost, pairs, backend);
          load->wait();
          store->wait();
          moved += 2 * count * options.block_bytes;
        }
      } catch (...) {
        failure = std::current_exception();
      }
    });
    std::vector<double> with;
    try {
      matmul_rate(cublas, compute, options, a, b, c);  // let the copies reach their rate
      for (unsigned r = 0; r < options.repeat; ++r) {
        if (progress) progress(cat("matmul with ", backend_name(backend), " copies ", r + 1, "/", options.repeat));
        with.push_back(matmul_rate(cublas, compute, options, a, b, c));
      }
    } catch (...) {
      stop = true;
      copier.join();
      throw;
    }
    stop = true;
    copier.join();
    if (failure) std::rethrow_exception(failure);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    OverlapRow row;
    row.backend = std::string(backend_name(backend));
    if (backend == CopyBackend::kAuto) row.backend = cat("auto(", backend_name(loads->auto_backend(Direction::kHostToDevice)), ")");
    row.tflops = summarize(with);
    row.slowdown = 1.0 - row.tflops.median / rows.front().tflops.median;
    row.copy_gbps = static_cast<double>(moved.load()) / seconds / 1e9;
    rows.push_back(row);
  }
  cudaStreamDestroy(compute);
  return rows;
}

}  // namespace hugepin::bench
