// A program that uses the CUDA runtime and driver (the fakes in this folder) like an application
// does, run under LD_PRELOAD=libhugepin_preload.so by shim_preload_test. Each scenario checks what
// it sees, prints one line per failed check, and exits 0 when every check held.
//
//   shim_probe alloc SIZE:WHO ...   allocate each SIZE (runtime) and check who served it
//                                   (WHO: shim or cuda), write and check every byte, free all
//   shim_probe calls                the calls around a shim allocation: device pointer, flags,
//                                   register, unregister, free, the allocation table
//   shim_probe foreign              frees of pointers the shim did not hand out
//   shim_probe double-free          a shim allocation freed twice
//   shim_probe threads N            N threads allocating and freeing at once (fixed seed)
//   shim_probe driver               the driver API (cuMemHostAlloc ...), and frees across APIs
//   shim_probe driver-uninit        cuMemHostAlloc before cuInit
//   shim_probe pending-error        a runtime error the application has not read yet
//   shim_probe fork                 a child process next to a parent holding shim allocations
//   shim_probe hold SIZE            allocate SIZE through the shim, print the allocation table
//                                   path, wait for stdin to close, free, exit
//   shim_probe idle                 no CUDA call at all
//
// Environment read here: PROBE_PAGE, the page size shim allocations must come in (e.g. 4096),
// and PROBE_SHM_DIR, where the allocation table must be (default /dev/shm).
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/pattern.h"
#include "base/size.h"
#include "shim/cuda_abi.h"
#include "shim/shim_registry.h"

extern "C" {
int cudaHostAlloc(void** ptr, size_t size, unsigned int flags);
int cudaMallocHost(void** ptr, size_t size);
int cudaFreeHost(void* ptr);
int cudaHostRegister(void* ptr, size_t size, unsigned int flags);
int cudaHostUnregister(void* ptr);
int cudaHostGetFlags(unsigned int* flags, void* host);
int cudaHostGetDevicePointer(void** device, void* host, unsigned int flags);
int cudaGetLastError();
int cudaPeekAtLastError();
int fakecuda_calls(const char* function);
int fakecuda_live_allocations();
int fakecuda_live_registrations();
int fakecuda_registration(const void* ptr, size_t* size, unsigned* flags);

int cuInit(unsigned int flags);
int cuMemHostAlloc(void** ptr, size_t size, unsigned int flags);
int cuMemAllocHost_v2(void** ptr, size_t size);
int cuMemFreeHost(void* ptr);
int cuMemHostUnregister(void* ptr);
int cuMemHostGetFlags(unsigned int* flags, void* host);
int fakecu_calls(const char* function);
int fakecu_live_registrations();
int fakecu_registration(const void* ptr, size_t* size, unsigned* flags);
}

namespace {

using namespace hugepin;

std::atomic<int> g_failures{0};

void check(bool condition, const std::string& what) {
  if (condition) return;
  ++g_failures;
  std::printf("FAIL: %s\n", what.c_str());
  std::fflush(stdout);
}

uint64_t size_arg(const char* text) {
  std::optional<uint64_t> bytes = parse_size(text);
  if (!bytes) {
    std::printf("FAIL: '%s' is not a size\n", text);
    std::exit(2);
  }
  return *bytes;
}

uint64_t expected_page() {
  const char* text = std::getenv("PROBE_PAGE");
  return text != nullptr ? std::strtoull(text, nullptr, 10) : 0;
}

std::string table_path() {
  const char* dir = std::getenv("PROBE_SHM_DIR");
  return cat(dir != nullptr ? dir : "/dev/shm", "/hugepin-shim-table.", getpid());
}

// The live entry of this process's allocation table at `address`, if any.
std::optional<ShimAllocation> table_entry(const void* address) {
  ShimTable table = read_shim_table(real_os(), table_path());
  for (const ShimAllocation& allocation : table.allocations) {
    if (allocation.address == reinterpret_cast<uintptr_t>(address)) return allocation;
  }
  return std::nullopt;
}

// Writes a pattern over all `bytes` and checks it reads back.
void check_memory(void* memory, uint64_t bytes, uint64_t seed, const std::string& what) {
  uint64_t words = bytes / 8 * 8;
  fill_pattern(memory, words, seed);
  check(!find_pattern_mismatch(memory, words, seed), cat(what, ": the pattern does not read back"));
}

// Checks that `memory` (asked as `bytes`) was served by the shim: registered by it (Portable |
// Mapped), in whole pages of the expected size, and listed in the allocation table.
void check_shim_served(void* memory, uint64_t bytes, const std::string& what) {
  size_t size = 0;
  unsigned flags = 0;
  bool registered = fakecuda_registration(memory, &size, &flags) == 1 || fakecu_registration(memory, &size, &flags) == 1;
  check(registered, cat(what, ": not registered by the shim"));
  check(flags == (cuda::kHostRegisterPortable | cuda::kHostRegisterMapped), cat(what, ": registered with flags ", flags));
  uint64_t page = expected_page();
  if (page != 0) {
    check(size == *round_up(bytes, page), cat(what, ": registered ", size, " bytes, expected ", *round_up(bytes, page)));
    check(reinterpret_cast<uintptr_t>(memory) % page == 0, cat(what, ": not page-aligned"));
  }
  std::optional<ShimAllocation> entry = table_entry(memory);
  check(entry.has_value(), cat(what, ": not in the allocation table ", table_path()));
  if (entry) {
    check(entry->bytes_asked == bytes, cat(what, ": table says ", entry->bytes_asked, " bytes asked"));
    check(entry->bytes_given == size, cat(what, ": table says ", entry->bytes_given, " bytes given"));
  }
}

// alloc SIZE:WHO[:FLAGS] ...  (FLAGS: cudaHostAlloc flags, default cudaHostAllocPortable)
int alloc(int argc, char** argv) {
  struct Item {
    uint64_t bytes;
    bool by_shim;
    unsigned flags;
    void* memory;
  };
  std::vector<Item> items;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    size_t colon = arg.find(':');
    size_t second = colon == std::string::npos ? colon : arg.find(':', colon + 1);
    std::string who = colon == std::string::npos ? "" : arg.substr(colon + 1, second - colon - 1);
    if (who != "shim" && who != "cuda") {
      std::printf("FAIL: '%s' is not SIZE:shim or SIZE:cuda\n", arg.c_str());
      return 2;
    }
    unsigned flags = second == std::string::npos ? cuda::kHostAllocPortable
                                                 : static_cast<unsigned>(std::stoul(arg.substr(second + 1)));
    items.push_back({size_arg(arg.substr(0, colon).c_str()), who == "shim", flags, nullptr});
  }
  const int registrations_before = fakecuda_live_registrations();
  for (size_t i = 0; i < items.size(); ++i) {
    Item& item = items[i];
    const std::string what = cat("allocation ", i, " of ", item.bytes, " bytes");
    int calls = fakecuda_calls("cudaHostAlloc");
    int rc = cudaHostAlloc(&item.memory, item.bytes, item.flags);
    check(rc == 0, cat(what, ": cudaHostAlloc returned ", rc));
    bool by_cuda = fakecuda_calls("cudaHostAlloc") == calls + 1;
    check(by_cuda != item.by_shim, cat(what, ": served by ", by_cuda ? "CUDA" : "the shim", ", expected the other"));
    if (rc != 0) continue;
    if (item.by_shim) check_shim_served(item.memory, item.bytes, what);
    check_memory(item.memory, item.bytes, i, what);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    check(find_pattern_mismatch(items[i].memory, items[i].bytes / 8 * 8, i) == std::nullopt,
          cat("allocation ", i, ": overwritten by a later one"));
  }
  for (Item& item : items) check(cudaFreeHost(item.memory) == 0, "cudaFreeHost failed");
  check(fakecuda_live_registrations() == registrations_before, "registrations left after every free");
  check(fakecuda_live_allocations() == 0, "CUDA allocations left after every free");
  check(cudaGetLastError() == 0, "the shim left a runtime error behind");
  for (const Item& item : items) check(!table_entry(item.memory), "a freed allocation is still in the allocation table");
  return 0;
}

int calls() {
  void* memory = nullptr;
  const uint64_t bytes = 3 * kMiB + 5;
  check(cudaHostAlloc(&memory, bytes, cuda::kHostAllocMapped) == 0 && fakecuda_calls("cudaHostAlloc") == 0,
        "cudaHostAlloc was not served by the shim");
  check_shim_served(memory, bytes, "cudaHostAlloc");

  void* device = nullptr;
  check(cudaHostGetDevicePointer(&device, static_cast<char*>(memory) + 100, 0) == 0, "cudaHostGetDevicePointer failed");
  check(device == static_cast<char*>(memory) + 100, "cudaHostGetDevicePointer gave another address");
  unsigned flags = 99;
  check(cudaHostGetFlags(&flags, static_cast<char*>(memory) + 4096) == 0 && flags == cuda::kHostAllocMapped,
        cat("cudaHostGetFlags gave ", flags, ", not the flags asked"));
  // The real runtime's answers for cudaHostAlloc memory (measured on an H200 host): invalid value.
  check(cudaHostRegister(static_cast<char*>(memory) + 4096, 4096, 0) == cuda::kErrorInvalidValue,
        "cudaHostRegister of shim memory was not refused as CUDA refuses cudaHostAlloc memory");
  check(cudaGetLastError() == cuda::kErrorInvalidValue, "the refusal did not set the last error");
  check(cudaHostUnregister(memory) == cuda::kErrorInvalidValue,
        "cudaHostUnregister of shim memory was not refused as CUDA refuses cudaHostAlloc memory");
  check(cudaGetLastError() == cuda::kErrorInvalidValue, "the unregister refusal did not set the last error");
  size_t size = 0;
  check(fakecuda_registration(memory, &size, &flags) == 1, "cudaHostUnregister undid the shim's registration");

  void* small = nullptr;
  check(cudaMallocHost(&small, 4096) == 0 && fakecuda_calls("cudaMallocHost") == 1, "a small cudaMallocHost was not CUDA's");
  void* large = nullptr;
  check(cudaMallocHost(&large, 2 * kMiB) == 0 && fakecuda_calls("cudaMallocHost") == 1,
        "a large cudaMallocHost was not the shim's");
  check(cudaHostGetFlags(&flags, large) == 0 && flags == cuda::kHostAllocMapped,
        "cudaMallocHost memory does not report the Mapped bit, as CUDA does");
  check_memory(large, 2 * kMiB, 7, "cudaMallocHost");

  ShimTable table = read_shim_table(real_os(), table_path());
  check(table.problem.empty(), cat("allocation table: ", table.problem));
  check(table.alive, "the allocation table does not show this process as alive");
  check(table.pid == getpid(), "the allocation table has another pid");
  check(table.program.find("shim_probe") == 0, cat("the allocation table names program '", table.program, "'"));
  check(table.allocations.size() == 2, cat("the allocation table lists ", table.allocations.size(), " allocations"));
  check(table.bytes_asked() == bytes + 2 * kMiB, cat("the table counts ", table.bytes_asked(), " bytes asked"));

  check(cudaFreeHost(memory) == 0, "cudaFreeHost of a shim allocation failed");
  check(fakecuda_registration(memory, &size, &flags) == 0, "freeing did not unregister");
  check(!table_entry(memory), "a freed allocation stays in the table");
  check(cudaFreeHost(large) == 0 && cudaFreeHost(small) == 0, "freeing the cudaMallocHost memory failed");
  check(fakecuda_live_registrations() == 0 && fakecuda_live_allocations() == 0, "memory left registered or allocated");
  check(cudaGetLastError() == 0, "a runtime error was left behind");
  return 0;
}

int foreign() {
  void* small = nullptr;
  check(cudaHostAlloc(&small, 8192, 0) == 0, "a small cudaHostAlloc failed");
  check(cudaFreeHost(small) == 0 && fakecuda_calls("cudaFreeHost") == 1, "CUDA did not free its own allocation");
  check(fakecuda_live_allocations() == 0, "CUDA's allocation was not freed");
  void* heap = std::malloc(64);
  check(cudaFreeHost(heap) == cuda::kErrorInvalidValue, "freeing heap memory did not fail as CUDA does");
  check(cudaGetLastError() == cuda::kErrorInvalidValue, "freeing heap memory did not set the last error");
  check(cudaHostUnregister(heap) == cuda::kErrorHostMemoryNotRegistered, "unregistering foreign memory changed");
  (void)cudaGetLastError();
  std::free(heap);
  check(cudaFreeHost(nullptr) == 0, "cudaFreeHost(NULL) failed");
  // Registering the application's own memory is CUDA's business.
  void* pages = mmap(nullptr, 8 * kMiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  check(cudaHostRegister(pages, 8 * kMiB, 0) == 0 && cudaHostUnregister(pages) == 0,
        "registering and unregistering application memory failed");
  munmap(pages, 8 * kMiB);
  return 0;
}

int double_free() {
  void* memory = nullptr;
  check(cudaHostAlloc(&memory, 3 * kMiB, 0) == 0 && fakecuda_calls("cudaHostAlloc") == 0, "not served by the shim");
  check(cudaFreeHost(memory) == 0, "the first free failed");
  int calls = fakecuda_calls("cudaFreeHost");
  check(cudaFreeHost(memory) == cuda::kErrorInvalidValue, "a double free did not return cudaErrorInvalidValue");
  check(cudaGetLastError() == cuda::kErrorInvalidValue, "a double free did not set the last error");
  check(fakecuda_calls("cudaFreeHost") == calls + 1, "CUDA was not asked for its answer");
  check(cudaFreeHost(memory) == cuda::kErrorInvalidValue, "a third free did not return cudaErrorInvalidValue");
  (void)cudaGetLastError();
  return 0;
}

int threads(int count) {
  constexpr int kRounds = 30;
  std::vector<std::thread> workers;
  for (int t = 0; t < count; ++t) {
    workers.emplace_back([t] {
      std::mt19937_64 random(20261129 + t);
      std::vector<std::pair<void*, uint64_t>> held;
      for (int round = 0; round < kRounds; ++round) {
        if (!held.empty() && random() % 3 == 0) {
          size_t pick = random() % held.size();
          auto [memory, seed] = held[pick];
          uint64_t bytes = seed >> 16;
          check(!find_pattern_mismatch(memory, bytes / 8 * 8, seed), cat("thread ", t, ": a pattern changed"));
          check(cudaFreeHost(memory) == 0, cat("thread ", t, ": cudaFreeHost failed"));
          held.erase(held.begin() + static_cast<long>(pick));
          continue;
        }
        // Half below the threshold (1 MiB in the test), half above: both paths at once.
        uint64_t bytes = random() % 2 == 0 ? 4096 + random() % (512 * kKiB) : kMiB + random() % (2 * kMiB);
        void* memory = nullptr;
        if (cudaHostAlloc(&memory, bytes, 0) != 0) {
          check(false, cat("thread ", t, ": cudaHostAlloc of ", bytes, " failed"));
          continue;
        }
        uint64_t seed = (bytes << 16) | static_cast<uint64_t>(t * kRounds + round);
        fill_pattern(memory, bytes / 8 * 8, seed);
        held.emplace_back(memory, seed);
      }
      for (auto [memory, seed] : held) {
        check(!find_pattern_mismatch(memory, (seed >> 16) / 8 * 8, seed), cat("thread ", t, ": a pattern changed"));
        check(cudaFreeHost(memory) == 0, cat("thread ", t, ": cudaFreeHost failed"));
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  check(fakecuda_live_registrations() == 0, cat(fakecuda_live_registrations(), " registrations left"));
  check(fakecuda_live_allocations() == 0, cat(fakecuda_live_allocations(), " CUDA allocations left"));
  ShimTable table = read_shim_table(real_os(), table_path());
  check(table.problem.empty() && table.allocations.empty(), "the allocation table is not empty at the end");
  check(fakecuda_calls("cudaHostRegister") > 0 && fakecuda_calls("cudaHostAlloc") > 0, "one of the paths was never used");
  std::printf("threads: %d shim allocations, %d CUDA allocations\n", fakecuda_calls("cudaHostRegister"),
              fakecuda_calls("cudaHostAlloc"));
  return 0;
}

int driver() {
  check(cuInit(0) == 0, "cuInit failed");
  void* memory = nullptr;
  check(cuMemHostAlloc(&memory, 3 * kMiB, cuda::kMemHostAllocDeviceMap) == 0 && fakecu_calls("cuMemHostAlloc") == 0,
        "cuMemHostAlloc was not served by the shim");
  check_shim_served(memory, 3 * kMiB, "cuMemHostAlloc");
  unsigned flags = 0;
  check(cuMemHostGetFlags(&flags, memory) == 0 && flags == cuda::kMemHostAllocDeviceMap, "cuMemHostGetFlags changed");
  check(cuMemHostUnregister(memory) == cuda::kDriverErrorHostMemoryNotRegistered, "cuMemHostUnregister of shim memory");
  check(fakecu_live_registrations() == 1, "cuMemHostUnregister undid the shim's registration");
  check(cuMemFreeHost(memory) == 0 && fakecu_live_registrations() == 0, "cuMemFreeHost did not free and unregister");
  check(cuMemFreeHost(memory) == cuda::kDriverErrorInvalidValue, "a double cuMemFreeHost was not refused");

  void* second = nullptr;
  check(cuMemAllocHost_v2(&second, 2 * kMiB) == 0 && fakecu_calls("cuMemAllocHost_v2") == 0,
        "cuMemAllocHost was not served by the shim");
  check_memory(second, 2 * kMiB, 3, "cuMemAllocHost");
  // Pinned memory from either API may be freed by the other; each is unregistered by its own.
  check(cudaFreeHost(second) == 0 && fakecu_live_registrations() == 0, "cudaFreeHost of driver memory");
  void* third = nullptr;
  check(cudaHostAlloc(&third, 2 * kMiB, 0) == 0 && fakecuda_live_registrations() == 1, "cudaHostAlloc by the shim");
  check(cuMemFreeHost(third) == 0 && fakecuda_live_registrations() == 0, "cuMemFreeHost of runtime memory");
  void* small = nullptr;
  check(cuMemHostAlloc(&small, 4096, 0) == 0 && fakecu_calls("cuMemHostAlloc") == 1, "a small cuMemHostAlloc");
  check(cuMemFreeHost(small) == 0 && fakecu_calls("cuMemFreeHost") == 2, "a small cuMemFreeHost");
  return 0;
}

int driver_uninit() {
  void* memory = nullptr;
  check(cuMemHostAlloc(&memory, 3 * kMiB, 0) == cuda::kDriverErrorNotInitialized,
        "cuMemHostAlloc before cuInit did not fail as the driver does");
  check(fakecu_calls("cuMemHostAlloc") == 1, "the driver was not asked");
  return 0;
}

int pending_error() {
  int dummy = 0;
  check(cudaFreeHost(&dummy) == cuda::kErrorInvalidValue, "the provoked error");
  void* memory = nullptr;
  check(cudaHostAlloc(&memory, 3 * kMiB, 0) == 0 && fakecuda_calls("cudaHostAlloc") == 1,
        "with an error pending, the request did not go to CUDA");
  check(cudaGetLastError() == cuda::kErrorInvalidValue, "the pending error was lost");
  void* second = nullptr;
  check(cudaHostAlloc(&second, 3 * kMiB, 0) == 0 && fakecuda_calls("cudaHostAlloc") == 1,
        "with no error pending, the shim did not serve");
  check(cudaFreeHost(memory) == 0 && cudaFreeHost(second) == 0, "freeing failed");
  return 0;
}

int fork_child() {
  void* memory = nullptr;
  check(cudaHostAlloc(&memory, 3 * kMiB, 0) == 0 && fakecuda_calls("cudaHostAlloc") == 0, "parent: not the shim's");
  fill_pattern(memory, 3 * kMiB, 11);
  std::fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    // The child inherited the parent's allocation (the mapping is shared) but does not own it.
    int failures = 0;
    if (find_pattern_mismatch(memory, 3 * kMiB, 11)) ++failures;
    void* mine = nullptr;
    if (cudaHostAlloc(&mine, 2 * kMiB, 0) != 0) ++failures;
    if (mine != nullptr && cudaFreeHost(mine) != 0) ++failures;
    std::fflush(stdout);
    std::exit(failures);  // runs the exit handlers, as a child that returns from main does
  }
  int status = 0;
  check(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed");
  check(access(table_path().c_str(), F_OK) == 0, "the child's exit removed the parent's allocation table");
  check(access(cat(table_path().substr(0, table_path().rfind('.') + 1), child).c_str(), F_OK) != 0,
        "the child's allocation table outlived it");
  check(!find_pattern_mismatch(memory, 3 * kMiB, 11), "the parent's allocation changed");
  check(table_entry(memory).has_value(), "the parent's allocation left the table");
  check(cudaFreeHost(memory) == 0, "parent: cudaFreeHost failed");
  return 0;
}

int hold(const char* size) {
  void* memory = nullptr;
  uint64_t bytes = size_arg(size);
  check(cudaHostAlloc(&memory, bytes, 0) == 0 && fakecuda_calls("cudaHostAlloc") == 0, "not served by the shim");
  check_memory(memory, bytes, 5, "hold");
  std::printf("table %s\n", table_path().c_str());
  std::fflush(stdout);
  char buffer[16];
  while (read(STDIN_FILENO, buffer, sizeof buffer) > 0) {
  }
  check(cudaFreeHost(memory) == 0, "cudaFreeHost failed");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::printf("usage: shim_probe SCENARIO ...\n");
    return 2;
  }
  std::string scenario = argv[1];
  int rc = 0;
  if (scenario == "alloc") {
    rc = alloc(argc - 2, argv + 2);
  } else if (scenario == "calls") {
    rc = calls();
  } else if (scenario == "foreign") {
    rc = foreign();
  } else if (scenario == "double-free") {
    rc = double_free();
  } else if (scenario == "threads" && argc == 3) {
    rc = threads(std::atoi(argv[2]));
  } else if (scenario == "driver") {
    rc = driver();
  } else if (scenario == "driver-uninit") {
    rc = driver_uninit();
  } else if (scenario == "pending-error") {
    rc = pending_error();
  } else if (scenario == "fork") {
    rc = fork_child();
  } else if (scenario == "hold" && argc == 3) {
    rc = hold(argv[2]);
  } else if (scenario == "idle") {
    rc = 0;
  } else {
    std::printf("unknown scenario '%s'\n", scenario.c_str());
    return 2;
  }
  if (rc != 0) return rc;
  if (g_failures == 0) std::printf("ok: %s\n", scenario.c_str());
  return g_failures == 0 ? 0 : 1;
}
