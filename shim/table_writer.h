// The shim's side of its allocation table (shim/table_layout.h): one file per process,
// <dir>/hugepin-shim-table.<pid>, created on the first allocation the shim serves and removed when
// the process exits.
//
// Thread-safety: publish and retract REQUIRE the caller to serialize them (the shim holds its
// mutex); readers in other processes need no lock (each record is a seqlock).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/os.h"
#include "shim/table_layout.h"

namespace hugepin {

struct TableEntry {
  uint64_t address = 0;
  uint64_t bytes_asked = 0;
  uint64_t bytes_given = 0;
  uint64_t page_size = 0;
  int node = -1;
  shim_table::Backing backing = shim_table::Backing::kPrivate;
  std::string_view arena;  // with kArena
  uint32_t rank = 0;       // with kArena
  shim_table::Api api = shim_table::Api::kRuntime;
  uint32_t flags = 0;
};

class TableWriter {
 public:
  // Creates the table of this process in `dir` (mode 0600; a leftover file of a dead process
  // that had the same pid is replaced), arranges for it to be unlinked at exit, and removes the
  // tables this user's dead processes left in `dir`. Throws Error naming the file when it cannot.
  static std::unique_ptr<TableWriter> create(Os& os, const std::string& dir);
  ~TableWriter();  // unmaps; the file stays until exit
  TableWriter(const TableWriter&) = delete;
  TableWriter& operator=(const TableWriter&) = delete;

  // Publishes an allocation. Returns its slot, or -1 when every slot is taken.
  int publish(const TableEntry& entry);
  // Marks the allocation in `slot` as gone. REQUIRES: `slot` came from publish.
  void retract(int slot);

  const std::string& path() const { return path_; }
  pid_t pid() const { return pid_; }

 private:
  TableWriter(Os& os, std::string path, pid_t pid, void* data);

  shim_table::Record& record(uint32_t slot);

  Os& os_;
  std::string path_;
  pid_t pid_;
  void* data_;
  uint32_t next_slot_ = 0;  // where the search for a free slot starts
};

}  // namespace hugepin
