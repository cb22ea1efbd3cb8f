// Spill throughput: the disk tier's io_uring path (O_DIRECT, fixed buffers) against pread/pwrite
// thread pools (O_DIRECT, and buffered as engines do today), on the same file, the same memory
// (an arena region) and the same chunks in the same random order, both directions; and a
// reference for what the device does sequentially with large requests at a high queue depth.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/os.h"
#include "bench/stats.h"

namespace hugepin::bench {

struct SpillBenchOptions {
  std::string dir = "/var/tmp";  // where the file goes: the disk under test
  uint64_t bytes = 1ULL << 30;
  uint64_t chunk_bytes = 2 << 20;
  unsigned job_chunks = 8;     // chunks per submitted job
  unsigned queue_depth = 32;   // io_uring
  unsigned submit_batch = 8;   // io_uring
  uint64_t request_bytes = 2 << 20;
  unsigned threads = 8;        // thread pools
  uint64_t reference_request_bytes = 8 << 20;
  unsigned reference_queue_depth = 32;
  unsigned repeat = 3;
  uint64_t page_size = 0;      // of the arena region; 0: best available
  uint64_t seed = 1;
  // Which rows: any of "uring", "pool", "buffered", "device"; empty: all.
  std::vector<std::string> methods;
};

struct SpillBenchRow {
  std::string method;     // "io_uring fixed O_DIRECT", ...
  std::string direction;  // "write" / "read"
  std::string detail;     // the engine's description
  Summary gb_per_second;
  Summary cpu_seconds_per_gb;  // user + system time of this process (getrusage) per GB moved
};

struct SpillBenchReport {
  std::string file;
  std::string file_system;  // "ext4 on device 254:0"
  uint64_t page_size = 0;   // of the memory spilled
  std::vector<SpillBenchRow> rows;  // write rows, then read rows; the reference last in each
  std::string cache_note;   // how the page cache was kept out of the read figures
};

// Writes the file once unmeasured, then runs every method `repeat` times each way, alternating
// methods so that drift hits all, checking the data of the first read of each method. Throws Error on any I/O failure. Calls `progress`
// with a line before each run. Removes its file and arena when done.
SpillBenchReport run_spill_bench(Os& os, const SpillBenchOptions& options,
                                 const std::function<void(const std::string&)>& progress);

}  // namespace hugepin::bench
