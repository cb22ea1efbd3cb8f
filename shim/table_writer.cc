#include "shim/table_writer.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/contract.h"
#include "base/error.h"
#include "base/trusted_file.h"
#include "shim/shim_registry.h"

namespace hugepin {
namespace {

using shim_table::Header;
using shim_table::Record;

// What the exit handler removes: fixed storage, so that it runs without allocating.
char g_exit_path[PATH_MAX];
pid_t g_exit_pid = 0;

void unlink_at_exit() {
  // A child forked after the table was made inherits this handler; only the owner removes it.
  // The kernel directly, not the Os: the Os the table was made with may be destroyed before exit
  // handlers run, and Os::unlink's std::string would allocate.
  if (g_exit_pid != 0 && g_exit_pid == getpid()) ::unlink(g_exit_path);
}

void copy_fixed(char* field, size_t size, std::string_view text) {
  std::memset(field, 0, size);
  std::memcpy(field, text.data(), std::min(text.size(), size - 1));
}

// Creates the table file (O_EXCL: nothing that exists is opened, a planted link included).
TrustedFile create_file(Os& os, const std::string& dir, const std::string& name) {
  const FileRule rule{FileType::kRegular, FileOwners::kTrusted, "shim table"};
  try {
    return open_trusted(os, {dir, name}, O_RDWR | O_CREAT | O_EXCL, rule, 0600);
  } catch (const Error& error) {
    if (error.errno_value() != EEXIST) throw;
  }
  // Our pid is ours alone: a file with it was left by a dead process that had the same pid.
  os.unlink(cat(dir, "/", name));
  return open_trusted(os, {dir, name}, O_RDWR | O_CREAT | O_EXCL, rule, 0600);
}

}  // namespace

std::unique_ptr<TableWriter> TableWriter::create(Os& os, const std::string& dir) {
  const pid_t pid = getpid();
  const std::string name = cat(shim_table::kFilePrefix, pid);
  std::string path = cat(dir, "/", name);
  if (path.size() >= sizeof g_exit_path) throw Error(cat("shim table path ", path, " is too long"));
  TrustedFile file = create_file(os, dir, name);
  const int fd = file.fd.get();
  void* data = nullptr;
  int rc = os.fchmod(fd, 0600);  // umask-proof
  if (rc == 0) rc = os.ftruncate(fd, shim_table::kFileBytes);
  if (rc == 0) rc = os.mmap(shim_table::kFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0, &data);
  file.fd.close();
  if (rc < 0) {
    os.unlink(path);
    throw_errno(cat("cannot size and map the shim table ", path), -rc);
  }

  auto* header = static_cast<Header*>(data);
  header->version = shim_table::kVersion;
  header->header_size = sizeof(Header);
  header->record_size = sizeof(Record);
  header->capacity = shim_table::kCapacity;
  header->pid = pid;
  header->uid = getuid();
  header->start_ticks = process_start_ticks(os, pid).value_or(0);
  header->created_ns = static_cast<uint64_t>(os.realtime_ns());
  std::string comm;
  if (os.read_file("/proc/self/comm", &comm) == 0 && !comm.empty() && comm.back() == '\n') comm.pop_back();
  copy_fixed(header->program, sizeof header->program, comm);
  // The magic goes last: a reader that sees it sees a whole header.
  uint64_t magic = 0;
  std::memcpy(&magic, shim_table::kMagic, sizeof magic);
  header->magic.store(magic, std::memory_order_release);

  std::memcpy(g_exit_path, path.c_str(), path.size() + 1);
  if (g_exit_pid == 0) std::atexit(unlink_at_exit);
  g_exit_pid = pid;
  // Tables of this user's processes that died without their exit handler (a crash, SIGKILL).
  remove_stale_shim_tables(os, dir, getuid());
  return std::unique_ptr<TableWriter>(new TableWriter(os, std::move(path), pid, data));
}

TableWriter::TableWriter(Os& os, std::string path, pid_t pid, void* data)
    : os_(os), path_(std::move(path)), pid_(pid), data_(data) {}

TableWriter::~TableWriter() { os_.munmap(data_, shim_table::kFileBytes); }

Record& TableWriter::record(uint32_t slot) {
  return *reinterpret_cast<Record*>(static_cast<char*>(data_) + sizeof(Header) + uint64_t{slot} * sizeof(Record));
}

int TableWriter::publish(const TableEntry& entry) {
  for (uint32_t tried = 0; tried < shim_table::kCapacity; ++tried) {
    uint32_t slot = (next_slot_ + tried) % shim_table::kCapacity;
    Record& r = record(slot);
    if (r.live != 0) continue;
    // Odd now; acquire keeps the field stores below after it, so a reader never sees a changed
    // field with the old even sequence.
    uint32_t sequence = r.sequence.fetch_add(1, std::memory_order_acq_rel);
    r.address = entry.address;
    r.bytes_asked = entry.bytes_asked;
    r.bytes_given = entry.bytes_given;
    r.page_size = entry.page_size;
    r.node = entry.node;
    r.backing = static_cast<uint32_t>(entry.backing);
    r.rank = entry.rank;
    r.api = static_cast<uint32_t>(entry.api);
    r.flags = entry.flags;
    r.time_ns = static_cast<uint64_t>(os_.realtime_ns());
    copy_fixed(r.arena, sizeof r.arena, entry.arena);
    r.live = 1;
    r.sequence.store(sequence + 2, std::memory_order_release);  // pairs with the reader's copy
    next_slot_ = (slot + 1) % shim_table::kCapacity;
    return static_cast<int>(slot);
  }
  return -1;
}

void TableWriter::retract(int slot) {
  HUGEPIN_REQUIRE(slot >= 0 && static_cast<uint32_t>(slot) < shim_table::kCapacity, "slot ", slot);
  HUGEPIN_REQUIRE(record(static_cast<uint32_t>(slot)).live == 1, "slot ", slot, " holds no allocation");
  Record& r = record(static_cast<uint32_t>(slot));
  uint32_t sequence = r.sequence.fetch_add(1, std::memory_order_acq_rel);
  r.live = 0;
  r.sequence.store(sequence + 2, std::memory_order_release);
}

}  // namespace hugepin
