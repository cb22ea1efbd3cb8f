#include "shim/shim_registry.h"

#include <fcntl.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <exception>

#include "base/error.h"
#include "base/trusted_file.h"
#include "shim/table_layout.h"

namespace hugepin {
namespace {

using shim_table::Header;
using shim_table::Record;

// Anyone's table may be listed; none is followed, and a FIFO or device is never opened.
constexpr FileRule kTableRule{FileType::kRegular, FileOwners::kAny, "shim table"};
// The largest table check_header accepts.
constexpr uint64_t kMaxTableBytes = sizeof(Header) + uint64_t{shim_table::kCapacity} * 16 * sizeof(Record);

// A NUL-terminated string from a fixed field that may lack the NUL.
std::string fixed_string(const char* field, size_t size) { return std::string(field, strnlen(field, size)); }

std::string check_header(const Header& header, size_t file_size) {
  if (std::memcmp(&header.magic, shim_table::kMagic, sizeof shim_table::kMagic) != 0) {
    return "not a hugepin shim table (bad magic)";
  }
  if (header.version != shim_table::kVersion) {
    return cat("shim table layout version ", header.version, ", this hugepin reads version ", shim_table::kVersion);
  }
  if (header.header_size != sizeof(Header) || header.record_size != sizeof(Record)) {
    return cat("shim table header or record size ", header.header_size, "/", header.record_size, " (expected ",
               sizeof(Header), "/", sizeof(Record), "): corrupt");
  }
  uint64_t needed = sizeof(Header) + uint64_t{header.capacity} * sizeof(Record);
  if (header.capacity == 0 || header.capacity > shim_table::kCapacity * 16 || needed > file_size) {
    return cat("shim table of ", file_size, " bytes cannot hold its ", header.capacity, " records: truncated or corrupt");
  }
  return "";
}

const char* record_bytes(const std::string& file, uint32_t index) {
  return file.data() + sizeof(Header) + uint64_t{index} * sizeof(Record);
}

// The allocation a record holds, or nullopt for a free slot or one that was being changed (odd
// sequence) when it was read.
std::optional<ShimAllocation> decode_record(const char* bytes) {
  alignas(Record) char copy[sizeof(Record)];
  std::memcpy(copy, bytes, sizeof(Record));
  const auto* record = reinterpret_cast<const Record*>(copy);
  uint32_t sequence = record->sequence.load(std::memory_order_relaxed);
  if (sequence == 0 || sequence % 2 != 0 || record->live != 1) return std::nullopt;
  ShimAllocation allocation;
  allocation.address = record->address;
  allocation.bytes_asked = record->bytes_asked;
  allocation.bytes_given = record->bytes_given;
  allocation.page_size = record->page_size;
  allocation.node = record->node;
  allocation.backing = record->backing == static_cast<uint32_t>(shim_table::Backing::kArena) ? "arena" : "private";
  if (allocation.backing == "arena") {
    allocation.arena = fixed_string(record->arena, sizeof record->arena);
    allocation.rank = record->rank;
  }
  allocation.api = record->api == static_cast<uint32_t>(shim_table::Api::kDriver) ? "driver" : "runtime";
  allocation.flags = record->flags;
  allocation.time_ns = record->time_ns;
  return allocation;
}

// The live allocations of a table whose header checked out. The file is read again until every
// record reads the same twice in a row: a record the writer changed while read(2) copied it
// differs between the copies (its sequence moves on), so a torn copy is never used. Records that
// keep changing are left out.
std::vector<ShimAllocation> read_records(Os& os, const TrustedFile& file, const std::string& path, std::string first,
                                         uint32_t capacity) {
  std::vector<std::optional<ShimAllocation>> decoded(capacity);
  std::vector<uint32_t> pending(capacity);
  for (uint32_t i = 0; i < capacity; ++i) pending[i] = i;
  std::string previous = std::move(first);
  for (int round = 0; round < 8 && !pending.empty(); ++round) {
    std::string again;
    try {
      again = read_opened_file(os, file, path, kTableRule, kMaxTableBytes);
    } catch (const Error&) {
      break;
    }
    if (again.size() != previous.size()) break;
    std::vector<uint32_t> changed;
    for (uint32_t i : pending) {
      if (std::memcmp(record_bytes(previous, i), record_bytes(again, i), sizeof(Record)) == 0) {
        decoded[i] = decode_record(record_bytes(again, i));
      } else {
        changed.push_back(i);
      }
    }
    pending = std::move(changed);
    previous = std::move(again);
  }
  std::vector<ShimAllocation> allocations;
  for (auto& allocation : decoded) {
    if (allocation) allocations.push_back(std::move(*allocation));
  }
  return allocations;
}

}  // namespace

uint64_t ShimTable::bytes_asked() const {
  uint64_t total = 0;
  for (const ShimAllocation& allocation : allocations) total += allocation.bytes_asked;
  return total;
}

uint64_t ShimTable::bytes_given() const {
  uint64_t total = 0;
  for (const ShimAllocation& allocation : allocations) total += allocation.bytes_given;
  return total;
}

std::optional<pid_t> parse_shim_table_name(std::string_view file_name) {
  if (file_name.substr(0, shim_table::kFilePrefix.size()) != shim_table::kFilePrefix) return std::nullopt;
  std::string_view digits = file_name.substr(shim_table::kFilePrefix.size());
  pid_t pid = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || pid <= 0) return std::nullopt;
  return pid;
}

std::optional<uint64_t> process_start_ticks(Os& os, pid_t pid) {
  std::string stat;
  if (os.read_file(cat("/proc/", pid, "/stat"), &stat) < 0) return std::nullopt;
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so count fields from the
  // last ')'. After it, field 3 (state) is the first; the start time is field 22.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::string_view rest = std::string_view(stat).substr(close + 1);
  for (int field = 3; field <= 22; ++field) {
    size_t start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(start);
    size_t end = rest.find(' ');
    std::string_view value = rest.substr(0, end);
    if (field == 22) {
      uint64_t ticks = 0;
      auto [last, ec] = std::from_chars(value.data(), value.data() + value.size(), ticks);
      if (ec != std::errc() || last != value.data() + value.size()) return std::nullopt;
      return ticks;
    }
    if (end == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(end);
  }
  return std::nullopt;
}

ShimTable read_shim_table(Os& os, const std::string& path) {
  ShimTable table;
  table.path = path;
  try {
    std::string_view name = std::string_view(path).substr(path.rfind('/') + 1);
    table.pid = parse_shim_table_name(name).value_or(0);
    TrustedFile file;
    std::string contents;
    try {
      file = open_trusted(os, user_named(path), O_RDONLY, kTableRule);
      contents = read_opened_file(os, file, path, kTableRule, kMaxTableBytes);
    } catch (const Error& error) {
      table.problem = error.errno_value() == kRefusedErrno || error.errno_value() == EFBIG
                          ? std::string(error.what())
                          : cat("cannot read ", path, ": ", errno_text(error.errno_value()));
      return table;
    }
    if (contents.size() < sizeof(Header)) {
      table.problem = cat(path, " has ", contents.size(), " bytes, less than a table header: truncated");
      return table;
    }
    alignas(Header) char header_bytes[sizeof(Header)];
    std::memcpy(header_bytes, contents.data(), sizeof(Header));
    const auto& header = *reinterpret_cast<const Header*>(header_bytes);
    if (std::string problem = check_header(header, contents.size()); !problem.empty()) {
      table.problem = cat(path, ": ", problem);
      return table;
    }
    if (header.pid != table.pid) {
      table.problem = cat(path, ": written by pid ", header.pid, ", not by the pid its name gives");
      return table;
    }
    if (header.uid != file.status.st_uid) {
      // A table is made by the process it describes, so its owner is that process's uid: another
      // user's file claiming someone else's process is not believed (nor removed as theirs).
      table.problem = cat(path, ": claims uid ", header.uid, " but belongs to uid ", file.status.st_uid);
      return table;
    }
    table.program = fixed_string(header.program, sizeof header.program);
    table.uid = header.uid;
    table.created_ns = header.created_ns;
    std::optional<uint64_t> ticks = process_start_ticks(os, table.pid);
    table.alive = ticks && *ticks == header.start_ticks;
    table.allocations = read_records(os, file, path, std::move(contents), header.capacity);
  } catch (const std::exception& error) {
    table.problem = cat(path, ": ", error.what());
  }
  return table;
}

std::vector<ShimTable> list_shim_tables(Os& os, const std::string& shm_dir) {
  std::vector<ShimTable> tables;
  std::vector<std::string> names;
  if (os.list_data_dir(shm_dir, &names) < 0) return tables;
  std::vector<std::pair<pid_t, std::string>> files;
  for (const std::string& name : names) {
    if (auto pid = parse_shim_table_name(name)) files.emplace_back(*pid, name);
  }
  std::sort(files.begin(), files.end());
  for (const auto& [pid, name] : files) tables.push_back(read_shim_table(os, cat(shm_dir, "/", name)));
  return tables;
}

std::optional<ShimHolder> find_shim_holder(const std::vector<ShimTable>& tables, std::string_view arena, uint32_t rank) {
  for (const ShimTable& table : tables) {
    if (!table.alive || !table.problem.empty()) continue;
    ShimHolder holder{table.pid, table.program, table.uid, 0, 0, 0};
    for (const ShimAllocation& allocation : table.allocations) {
      if (allocation.backing != "arena" || allocation.arena != arena || allocation.rank != rank) continue;
      holder.bytes_given += allocation.bytes_given;
      holder.pinned_bytes += allocation.bytes_given;
      ++holder.allocations;
    }
    if (holder.allocations > 0) return holder;
  }
  return std::nullopt;
}

size_t remove_stale_shim_tables(Os& os, const std::string& shm_dir, uid_t uid) {
  size_t removed = 0;
  for (const ShimTable& table : list_shim_tables(os, shm_dir)) {
    if (table.alive || !table.problem.empty() || table.uid != uid) continue;
    if (os.unlink(table.path) == 0) ++removed;
  }
  return removed;
}

}  // namespace hugepin
