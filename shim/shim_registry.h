// Reading the shim's per-process allocation tables (shim/table_layout.h), for `hugepin shim list`
// and the inspector: which processes run the LD_PRELOAD shim, and which allocations it serves
// them now (bytes asked and given, page size, node, backing).
//
// Read-only and robust: a file that is truncated, corrupt, of another layout version, unreadable,
// or planted (a link, a FIFO, a file whose header claims another uid than its owner's: opened as
// base/trusted_file.h says) yields a ShimTable with `problem` set, never a crash, a hang or an
// exception. Tables of processes that
// are gone (a crash skips the unlink at exit) are listed with `alive` false.
//
// Thread-safety: free functions, no shared state.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/os.h"

namespace hugepin {

struct ShimAllocation {
  uint64_t address = 0;  // in the owning process
  uint64_t bytes_asked = 0;
  uint64_t bytes_given = 0;
  uint64_t page_size = 0;
  int node = -1;
  std::string backing;  // "private" or "arena"
  std::string arena;    // with backing "arena"
  uint32_t rank = 0;    // with backing "arena"
  std::string api;      // "runtime" (cudaHostAlloc, cudaMallocHost) or "driver" (cuMemHostAlloc, ...)
  uint32_t flags = 0;   // as the caller passed them
  uint64_t time_ns = 0; // CLOCK_REALTIME when served
};

struct ShimTable {
  std::string path;
  pid_t pid = 0;          // from the file name
  std::string program;    // the process's comm when the table was created
  uid_t uid = 0;
  uint64_t created_ns = 0;
  bool alive = false;     // the process that wrote it still runs (same pid and start time)
  std::string problem;    // why the table could not be read; "" when it was
  std::vector<ShimAllocation> allocations;  // live allocations, in slot order

  uint64_t bytes_asked() const;
  uint64_t bytes_given() const;
};

// The table of one file. Never throws.
ShimTable read_shim_table(Os& os, const std::string& path);

// Every table in `shm_dir` (files named hugepin-shim-table.<pid>), by pid. Never throws; a directory
// that cannot be listed gives an empty list.
std::vector<ShimTable> list_shim_tables(Os& os, const std::string& shm_dir = "/dev/shm");

// Removes the tables in `shm_dir` of processes that are gone and belong to `uid`. Returns how
// many it removed. Never throws.
size_t remove_stale_shim_tables(Os& os, const std::string& shm_dir, uid_t uid);

// A process that holds a rank's region through the shim, as `hugepin inspect` shows it.
struct ShimHolder {
  pid_t pid = 0;
  std::string program;
  uid_t uid = 0;
  uint64_t bytes_given = 0;   // the extents it handed out
  uint64_t pinned_bytes = 0;  // of those, registered with CUDA (each is, before it is recorded)
  size_t allocations = 0;
};

// The live process whose table holds allocations from region `rank` of `arena`; nullopt when none
// does. (A process that holds the region but has nothing allocated from it has no such record.)
std::optional<ShimHolder> find_shim_holder(const std::vector<ShimTable>& tables, std::string_view arena, uint32_t rank);

// The start time of process `pid` (field 22 of /proc/<pid>/stat, read through `os`), or nullopt
// when there is no such process or the file does not parse.
std::optional<uint64_t> process_start_ticks(Os& os, pid_t pid);

// The pid of a table file name ("hugepin-shim-table.123" -> 123), or nullopt.
std::optional<pid_t> parse_shim_table_name(std::string_view file_name);

}  // namespace hugepin
