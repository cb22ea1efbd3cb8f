#include "shim/shim.h"

#include <unistd.h>

#include <algorithm>
#include <exception>
#include <thread>

#include "base/log.h"
#include "base/size.h"
#include "hugemem/region.h"
#include "hugemem/topology.h"
#include "shim/fallback.h"

namespace hugepin {

Shim::Shim(Os& os, ShimConfig config) : os_(os), config_(std::move(config)), pid_(getpid()) {}

void* Shim::serve(const char* entry, uint64_t bytes, uint32_t flags, PinApi& api) {
  try {
    if (bytes > kMaxRequest) {
      throw Fallback("too-large", cat(bytes, " bytes is more than the ", format_bytes(kMaxRequest),
                                      " the shim registers at once (drivers refuse one registration of 512 GiB)"));
    }
    const int node = gpu_node(api);
    Backing backing = take_backing(bytes, node);
    if (backing.in_arena) place_extent(backing, node);
    if (int rc = api.register_memory(backing.address, backing.bytes); rc != 0) {
      api.clear_error();
      give_back(backing);
      throw Fallback(cat("register:", rc), cat(api.describe("registering", rc), " for ", format_bytes(backing.bytes),
                                               " of ", page_size_name(backing.page_size), " pages"));
    }
    try {
      record(backing, bytes, flags, api);
    } catch (...) {
      api.unregister_memory(backing.address);
      give_back(backing);
      throw;
    }
    try {  // from here the allocation is the caller's: a failure to log must not lose it
      log::info(cat(entry, "(", format_bytes(bytes), ") served: ", format_bytes(backing.bytes), " of ",
                    page_size_name(backing.page_size), " pages on node ", backing.node,
                    backing.in_arena ? cat(" from arena '", config_.arena, "' rank ", config_.rank)
                                     : std::string(" (private)")));
    } catch (...) {
    }
    return backing.address;
  } catch (const Fallback& fallback) {
    log::warn_once(fallback.cause(), cat(entry, "(", format_bytes(bytes), ") goes to CUDA: ", fallback.what()));
  } catch (const std::exception& error) {
    log::warn_once("internal", cat(entry, "(", format_bytes(bytes), ") goes to CUDA: ", error.what()));
  }
  return nullptr;
}

int Shim::gpu_node(PinApi& api) {
  std::string pci;
  if (int rc = api.current_gpu(&pci); rc != 0) {
    api.clear_error();
    std::string message = cat(api.describe("finding the current GPU", rc), ": mappings are not bound to a node");
    if (config_.strict) throw Fallback("gpu", cat("strict: ", message));
    log::warn_once("gpu", message);
    return -1;
  }
  {
    MutexLock lock(mutex_);
    if (auto it = gpu_nodes_.find(pci); it != gpu_nodes_.end()) return it->second;
  }
  int node = -1;
  try {
    node = pci_device_node(os_, pci);
  } catch (const Error& error) {
    std::string message = cat("the NUMA node of GPU ", pci, " is unknown (", error.what(), "): mappings are not bound to a node");
    if (config_.strict) throw Fallback("gpu-node", cat("strict: ", message));
    log::warn_once("gpu-node", message);
  }
  MutexLock lock(mutex_);
  gpu_nodes_[pci] = node;
  return node;
}

Shim::Backing Shim::take_backing(uint64_t bytes, int gpu_node) {
  Backing backing;
  if (config_.arena.empty()) {
    PrivateMapping mapping = map_private(os_, bytes, gpu_node, config_);
    backing.address = mapping.data;
    backing.bytes = mapping.bytes;
    backing.page_size = mapping.page_size;
    backing.node = mapping.all_on_node ? mapping.node : -1;
    return backing;
  }
  ArenaRegion* arena = nullptr;
  {
    MutexLock lock(mutex_);
    start_afresh_if_forked();
    if (!arena_) {
      // A control segment held exclusively past the claim's wait (a stuck holder) would cost every
      // request that wait, under this lock: after one such refusal, requests fall through at once
      // for a while. Other refusals are tried again on the next request.
      if (os_.monotonic_ns() < arena_locked_until_ns_) {
        throw Fallback("arena-locked", cat("arena '", config_.arena, "' was locked at the last attempt; trying again later"));
      }
      try {
        arena_ = ArenaRegion::open(os_, config_);
      } catch (const Fallback& refused) {
        if (refused.cause() == "arena-locked") arena_locked_until_ns_ = os_.monotonic_ns() + kLockedRetryNs;
        throw;
      }
    }
    arena = arena_.get();
  }
  std::optional<void*> address = arena->allocate(bytes, &backing.bytes);
  if (!address) throw Fallback("arena-full", arena->exhausted_message(bytes));
  backing.address = *address;
  backing.page_size = arena->page_size();
  backing.in_arena = true;
  return backing;
}

void Shim::give_back(const Backing& backing) {
  if (!backing.in_arena) {
    unmap_private(os_, PrivateMapping{backing.address, backing.bytes, backing.page_size, backing.node, false});
    return;
  }
  MutexLock lock(mutex_);
  if (arena_) arena_->release(backing.address);
}

void Shim::place_extent(Backing& backing, int gpu_node) {
  // Map the extent's pages (they exist in the region file) from a few threads, then ask where
  // they are. Registering would fault them in too, from one thread.
  const unsigned threads = std::min(4u, std::max(1u, std::thread::hardware_concurrency()));
  Placement placement;
  try {
    prefault(os_, backing.address, backing.bytes, backing.page_size, threads, {}, PrefaultMethod::kPopulate);
    placement = verify_placement(os_, backing.address, backing.bytes, backing.page_size, 256);
  } catch (const Error& error) {
    give_back(backing);
    throw Fallback("arena-prefault", cat("arena '", config_.arena, "' rank ", config_.rank, ": ", error.what()));
  }
  const int majority = placement.majority_node();
  backing.node = majority >= 0 && placement.all_on(majority) ? majority : -1;
  if (gpu_node < 0 || placement.all_on(gpu_node)) return;
  std::string message = cat("the GPU is on node ", gpu_node, ", arena '", config_.arena, "' rank ", config_.rank,
                            " has its pages on ", placement.describe());
  if (!config_.strict) {
    log::warn_once("arena-node", message);
    return;
  }
  give_back(backing);
  throw Fallback("arena-node", cat("strict: ", message));
}

void Shim::record(const Backing& backing, uint64_t bytes_asked, uint32_t flags, PinApi& api) {
  MutexLock lock(mutex_);
  start_afresh_if_forked();
  const auto address = reinterpret_cast<uintptr_t>(backing.address);
  Allocation& allocation = live_[address];
  allocation = Allocation{bytes_asked, backing.bytes, backing.page_size, backing.node, flags, &api, backing.in_arena, -1};
  if (freed_.erase(address) == 1) std::erase(freed_order_, address);
  try {
    publish(address, allocation);
  } catch (...) {
    // The table only makes the allocation visible to hugepin shim list: whatever goes wrong there
    // (out of memory), the allocation itself is made and tracked, and is returned to the caller.
  }
}

void Shim::publish(uintptr_t address, Allocation& allocation) {
  if (!table_) {
    try {
      table_ = TableWriter::create(real_os(), config_.shm_dir);
    } catch (const Error& error) {
      log::warn_once("table", cat("shim allocations are not visible to hugepin shim list: ", error.what()));
      return;
    }
  }
  TableEntry entry;
  entry.address = address;
  entry.bytes_asked = allocation.bytes_asked;
  entry.bytes_given = allocation.bytes_given;
  entry.page_size = allocation.page_size;
  entry.node = allocation.node;
  entry.backing = allocation.in_arena ? shim_table::Backing::kArena : shim_table::Backing::kPrivate;
  entry.arena = config_.arena;
  entry.rank = config_.rank;
  entry.api = allocation.api->kind();
  entry.flags = allocation.flags;
  allocation.slot = table_->publish(entry);
  if (allocation.slot < 0) {
    log::warn_once("table-full", cat("the shim allocation table ", table_->path(), " is full (", shim_table::kCapacity,
                                     " allocations): later ones are served but not listed"));
  }
}

Shim::ReleaseResult Shim::release(void* address) {
  const auto key = reinterpret_cast<uintptr_t>(address);
  Allocation allocation;
  {
    MutexLock lock(mutex_);
    start_afresh_if_forked();
    auto it = live_.find(key);
    if (it == live_.end()) return {freed_.count(key) != 0 ? Freed::kFreedBefore : Freed::kNotOurs, 0};
    allocation = it->second;
    live_.erase(it);
    if (allocation.slot >= 0 && table_) table_->retract(allocation.slot);
    remember_freed(key);
  }
  int rc = allocation.api->unregister_memory(address);
  if (rc == allocation.api->not_registered_code()) {
    // The context that held it is gone (cudaDeviceReset): the free still succeeds, and the
    // runtime must not keep that error for the caller's next cudaGetLastError.
    allocation.api->clear_error();
    rc = 0;
  }
  if (rc != 0) log::warn_once(cat("unregister:", rc), allocation.api->describe("unregistering a shim allocation", rc));
  give_back(Backing{address, allocation.bytes_given, allocation.page_size, allocation.node, allocation.in_arena});
  return {Freed::kReleased, rc};
}

void Shim::remember_freed(uintptr_t address) {
  if (freed_.insert(address).second) freed_order_.push_back(address);
  while (freed_order_.size() > kFreedMemory) {
    freed_.erase(freed_order_.front());
    freed_order_.pop_front();
  }
}

std::map<uintptr_t, Shim::Allocation>::iterator Shim::find_holding(const void* address) {
  const auto key = reinterpret_cast<uintptr_t>(address);
  auto it = live_.upper_bound(key);
  if (it == live_.begin()) return live_.end();
  --it;
  return key < it->first + it->second.bytes_given ? it : live_.end();
}

bool Shim::holds(const void* address) {
  MutexLock lock(mutex_);
  start_afresh_if_forked();
  return find_holding(address) != live_.end();
}

std::optional<uint32_t> Shim::flags_of(const void* address) {
  MutexLock lock(mutex_);
  start_afresh_if_forked();
  auto it = find_holding(address);
  if (it == live_.end()) return std::nullopt;
  return it->second.flags;
}

void Shim::note_cuda_allocation(const void* address) {
  const auto key = reinterpret_cast<uintptr_t>(address);
  MutexLock lock(mutex_);
  if (freed_.erase(key) == 1) std::erase(freed_order_, key);
}

size_t Shim::live_allocations() {
  MutexLock lock(mutex_);
  start_afresh_if_forked();
  return live_.size();
}

// The shim's lock, then the log's (the order every shim path takes them in): a child must not
// inherit either held by a thread it does not have.
void Shim::before_fork() {
  mutex_.lock();
  log::lock_for_fork();
}

void Shim::after_fork_in_parent() {
  log::unlock_after_fork();
  mutex_.unlock();
}

void Shim::after_fork_in_child() {
  forked_ = true;
  log::unlock_after_fork();
  mutex_.unlock();
}

void Shim::start_afresh_if_forked() {
  if (!forked_ && pid_ == getpid()) return;
  // The parent's allocations, table and arena region are the parent's: forget them here. Their
  // mappings stay (the child inherited them) until the child exits; the region's lock stays with
  // the parent.
  forked_ = false;
  pid_ = getpid();
  log::set_program(cat("hugepin-shim[", pid_, "]"));
  live_.clear();
  freed_.clear();
  freed_order_.clear();
  table_.reset();
  // Not reset(): that would unmap the region under any inherited pointer into it. The child keeps
  // its copy of the mapping and of the locked descriptor, and serves nothing from the region.
  (void)arena_.release();
}

}  // namespace hugepin
