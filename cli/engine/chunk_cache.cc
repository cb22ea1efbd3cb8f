#include "cli/engine/chunk_cache.h"

#include <algorithm>

namespace hugepin::cli {

JobKind job_kind(CacheOp op) {
  return op == CacheOp::kStore || op == CacheOp::kRestore ? JobKind::kStore : JobKind::kLoad;
}

ChunkCache::ChunkCache(uint64_t chunks, uint64_t gpu_slots, uint64_t seed) : chunks_(chunks), random_(seed) {
  for (ChunkId c = 0; c < chunks; ++c) free_.push_back(c);
  for (uint64_t s = 0; s < gpu_slots; ++s) slots_.push_back(s);
}

bool ChunkCache::may_take(CacheOp op, const Chunk& chunk) const {
  if (chunk.exclusive) return false;  // a restore is writing it
  if (op == CacheOp::kSpill) return chunk.on_disk != chunk.version;
  if (op == CacheOp::kRestore) return chunk.busy == 0 && chunk.on_disk == chunk.version;
  return true;
}

std::optional<CacheJob> ChunkCache::begin(CacheOp op, uint32_t count) {
  const bool slots = op == CacheOp::kLoad || op == CacheOp::kStore;
  if (slots && slots_.size() < count) return std::nullopt;
  CacheJob job{op, {}, {}, {}};
  if (op == CacheOp::kStore) {
    if (free_.size() < count) return std::nullopt;
    for (uint32_t i = 0; i < count; ++i) {
      job.chunks.push_back(free_.front());
      free_.pop_front();
      chunks_[job.chunks.back()].state = State::kStoring;
      job.versions.push_back(++version_);
    }
  } else {
    std::shuffle(stored_.begin(), stored_.end(), random_);
    for (ChunkId id : stored_) {
      if (job.chunks.size() < count && may_take(op, chunks_[id])) job.chunks.push_back(id);
    }
    if (job.chunks.size() < (op == CacheOp::kLoad ? count : 1)) return std::nullopt;
    for (ChunkId id : job.chunks) {
      ++chunks_[id].busy;
      chunks_[id].exclusive = op == CacheOp::kRestore;
      job.versions.push_back(chunks_[id].version);
    }
  }
  for (size_t i = 0; slots && i < job.chunks.size(); ++i) {
    job.slots.push_back(slots_.front());
    slots_.pop_front();
  }
  return job;
}

void ChunkCache::completed(const CacheJob& job) {
  for (size_t i = 0; i < job.chunks.size(); ++i) {
    Chunk& chunk = chunks_[job.chunks[i]];
    if (job.op == CacheOp::kStore) {
      chunk.state = State::kStored;
      chunk.version = job.versions[i];
      stored_.push_back(job.chunks[i]);
      continue;
    }
    --chunk.busy;
    if (job.op == CacheOp::kSpill) chunk.on_disk = job.versions[i];
    if (job.op == CacheOp::kRestore) chunk.exclusive = false;
  }
  slots_.insert(slots_.end(), job.slots.begin(), job.slots.end());
}

std::vector<ChunkId> ChunkCache::failed(const CacheJob& job, Epoch epoch) {
  held_slots_.push_back({epoch, job.slots});
  std::vector<ChunkId> half_written;
  for (ChunkId id : job.chunks) {
    if (job.op != CacheOp::kStore) --chunks_[id].busy;
    if (job.op == CacheOp::kRestore) {
      chunks_[id].exclusive = false;
      std::erase(stored_, id);
    }
    if (job.op == CacheOp::kStore || job.op == CacheOp::kRestore) {
      retire(id);
      half_written.push_back(id);
    }
  }
  return half_written;
}

std::vector<ChunkId> ChunkCache::evict(size_t want_free) {
  std::vector<ChunkId> evicted;
  while (free_.size() + retiring_ < want_free) {
    auto it = std::find_if(stored_.begin(), stored_.end(), [&](ChunkId c) { return chunks_[c].busy == 0; });
    if (it == stored_.end()) break;
    evicted.push_back(*it);
    stored_.erase(it);
    retire(evicted.back());
  }
  return evicted;
}

void ChunkCache::retire(ChunkId chunk) {
  ++retiring_;
  chunks_[chunk].state = State::kRetired;
  chunks_[chunk].retired_at = std::chrono::steady_clock::now();
}

double ChunkCache::reusable(ChunkId chunk) {
  --retiring_;
  chunks_[chunk].state = State::kFree;
  free_.push_back(chunk);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - chunks_[chunk].retired_at).count();
}

void ChunkCache::epoch_released(Epoch all_rank_epoch) {
  while (!held_slots_.empty() && held_slots_.front().first <= all_rank_epoch) {
    slots_.insert(slots_.end(), held_slots_.front().second.begin(), held_slots_.front().second.end());
    held_slots_.pop_front();
  }
}

std::optional<uint64_t> ChunkCache::stored_version(ChunkId chunk) const {
  if (chunks_.at(chunk).state != State::kStored) return std::nullopt;
  return chunks_[chunk].version;
}

}  // namespace hugepin::cli
