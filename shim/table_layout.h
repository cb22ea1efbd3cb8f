// The layout of the shim's per-process allocation table, the file that makes a process's shim
// allocations visible to `hugepin shim list` and the inspector:
//
//   <HUGEPIN_SHM_DIR>/hugepin-shim-table.<pid>  mode 0600, written only by process <pid>
//
// The name is out of the arenas' reach: a control segment is "hugepin." and an arena name, so no
// arena can be called after a table ("hugepin.shim.<pid>", the old name, was arena "shim.<pid>").
//
// Built in place (as DPDK rings are): a Header, then `capacity` fixed-size Records. The file is
// sized once at creation and never truncated; the writer creates it on its first allocation and
// unlinks it at exit. Offsets and plain values only: no pointer in it means anything to another
// process (`address` is for matching log lines, never dereferenced).
//
// Each record is a seqlock: the writer makes `sequence` odd, changes the fields, then makes it
// even again (release); a reader copies a record between two loads of `sequence` (acquire) and
// keeps the copy only when both are equal and even. One writer per file: the owning process,
// under its own mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

namespace hugepin::shim_table {

inline constexpr char kMagic[8] = {'H', 'P', 'S', 'H', 'I', 'M', 'T', '1'};
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kCapacity = 4096;
inline constexpr std::string_view kFilePrefix = "hugepin-shim-table.";
inline constexpr size_t kArenaNameBytes = 72;  // arena names have at most 64 characters
inline constexpr size_t kProgramBytes = 32;

enum class Backing : uint32_t { kPrivate = 1, kArena = 2 };
enum class Api : uint32_t { kRuntime = 1, kDriver = 2 };

struct Header {
  std::atomic<uint64_t> magic;  // the bytes of kMagic, stored last (release) once the rest is written
  uint32_t version;
  uint32_t header_size;  // sizeof(Header)
  uint32_t record_size;  // sizeof(Record)
  uint32_t capacity;     // records after the header
  int32_t pid;
  uint32_t uid;
  // The process's start time, field 22 of /proc/<pid>/stat: a live pid with another start time
  // is a different process that reused the number.
  uint64_t start_ticks;
  uint64_t created_ns;  // CLOCK_REALTIME
  char program[kProgramBytes];  // /proc/<pid>/comm, NUL-terminated
  uint8_t reserved[48];
};

struct alignas(64) Record {
  std::atomic<uint32_t> sequence;  // odd while the writer changes the record; 0: never used
  uint32_t live;                   // 1: an allocation the shim holds now
  uint64_t address;
  uint64_t bytes_asked;
  uint64_t bytes_given;            // what backs it: the request rounded up to the page
  uint64_t page_size;
  int32_t node;                    // NUMA node holding its pages, -1 when unknown or mixed
  uint32_t backing;                // Backing
  uint32_t rank;                   // with Backing::kArena
  uint32_t api;                    // Api: which entry point allocated it
  uint32_t flags;                  // the flags the caller passed
  uint32_t reserved0;
  uint64_t time_ns;                // CLOCK_REALTIME when it was served
  char arena[kArenaNameBytes];     // with Backing::kArena, NUL-terminated
};

static_assert(sizeof(Header) == 128);
static_assert(sizeof(Record) == 192);
static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<uint64_t>::is_always_lock_free);

inline constexpr uint64_t kFileBytes = sizeof(Header) + uint64_t{kCapacity} * sizeof(Record);

}  // namespace hugepin::shim_table
