#include "protocol/copy_pins.h"

namespace hugepin {

const char* chunk_state_name(ChunkState state) {
  switch (state) {
    case ChunkState::kActive: return "active";
    case ChunkState::kRetired: return "retired";
    case ChunkState::kFenced: return "fenced";
    case ChunkState::kReusable: return "reusable";
  }
  return "invalid";
}

CopyPins::CopyPins(uint32_t chunks) {
  if (chunks == 0) throw Error("copy pins: chunk count 0; the plan must give at least one chunk");
  records_.resize(chunks);
  reusable_.reserve(chunks);
}

void CopyPins::throw_out_of_range(ChunkId chunk) const {
  throw Error(cat("chunk ", chunk, " is out of range: the plan has ", records_.size(), " chunks"));
}

void CopyPins::pin(std::span<const ChunkId> chunks) {
  for (size_t i = 0; i < chunks.size(); ++i) {
    ChunkId chunk = chunks[i];
    if (chunk >= records_.size() || records_[chunk].state != ChunkState::kActive || records_[chunk].quarantined > 0) {
      undo_pin(chunks.first(i));
      refuse_pin(chunk);
    }
    if (records_[chunk].holds++ == 0) ++pinned_chunks_;
  }
  total_holds_ += chunks.size();
}

void CopyPins::undo_pin(std::span<const ChunkId> chunks) {
  for (ChunkId chunk : chunks) {
    if (--records_[chunk].holds == 0) --pinned_chunks_;
  }
}

void CopyPins::refuse_pin(ChunkId chunk) const {
  check_range(chunk);
  const Record& record = records_[chunk];
  if (record.state != ChunkState::kActive) {
    throw Error(cat("cannot pin chunk ", chunk, ": it is ", chunk_state_name(record.state),
                    ", not active (the engine retired it)"));
  }
  throw Error(cat("cannot pin chunk ", chunk, ": it is quarantined until an unresponsive rank's process exits"));
}

void CopyPins::unpin(std::span<const ChunkId> chunks) {
  for (size_t i = 0; i < chunks.size(); ++i) {
    ChunkId chunk = chunks[i];
    if (chunk >= records_.size() || records_[chunk].holds <= records_[chunk].quarantined) {
      undo_unpin(chunks.first(i));
      check_range(chunk);
      throw Error(cat("cannot unpin chunk ", chunk, ": listed more often than its ",
                      records_[chunk].holds - records_[chunk].quarantined, " unquarantined holds"));
    }
    Record& record = records_[chunk];
    if (--record.holds == 0) {
      --pinned_chunks_;
      if (record.state == ChunkState::kFenced) {
        --fenced_;
        make_reusable(chunk);
      }
    }
  }
  total_holds_ -= chunks.size();
}

// Puts back the holds an unpin took, newest first, so that chunks it made reusable leave the
// reusable list in the order they joined it.
void CopyPins::undo_unpin(std::span<const ChunkId> chunks) {
  for (size_t i = chunks.size(); i-- > 0;) {
    Record& record = records_[chunks[i]];
    if (record.holds++ == 0) {
      ++pinned_chunks_;
      if (record.state == ChunkState::kReusable) {
        record.state = ChunkState::kFenced;
        ++fenced_;
        reusable_.pop_back();
      }
    }
  }
}

void CopyPins::quarantine(std::span<const ChunkId> chunks) {
  for (size_t i = 0; i < chunks.size(); ++i) {
    ChunkId chunk = chunks[i];
    if (chunk >= records_.size() || records_[chunk].quarantined >= records_[chunk].holds) {
      for (size_t j = 0; j < i; ++j) {
        if (--records_[chunks[j]].quarantined == 0) --quarantined_chunks_;
      }
      check_range(chunk);
      throw Error(cat("cannot quarantine chunk ", chunk, ": every one of its ", records_[chunk].holds,
                      " holds is quarantined already"));
    }
    if (records_[chunk].quarantined++ == 0) ++quarantined_chunks_;
  }
}

void CopyPins::unquarantine(std::span<const ChunkId> chunks) {
  for (size_t i = 0; i < chunks.size(); ++i) {
    ChunkId chunk = chunks[i];
    if (chunk >= records_.size() || records_[chunk].quarantined == 0) {
      for (size_t j = 0; j < i; ++j) {
        if (records_[chunks[j]].quarantined++ == 0) ++quarantined_chunks_;
      }
      check_range(chunk);
      throw Error(cat("cannot end the quarantine of chunk ", chunk, ": it is not quarantined"));
    }
    if (--records_[chunk].quarantined == 0) --quarantined_chunks_;
  }
}

void CopyPins::throw_wrong_state(const char* what, ChunkId chunk, const char* why) const {
  throw Error(cat(what, " chunk ", chunk, ": it is ", chunk_state_name(records_[chunk].state), ", ", why));
}

void CopyPins::take_reusable(std::vector<ChunkId>* out) {
  for (ChunkId chunk : reusable_) records_[chunk].state = ChunkState::kActive;
  out->insert(out->end(), reusable_.begin(), reusable_.end());
  reusable_.clear();
}

}  // namespace hugepin
