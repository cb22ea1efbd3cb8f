#include "cli/engine/channel.h"

namespace hugepin::cli {

Message job_message(JobId id, const CacheJob& job, uint64_t blocks_per_chunk) {
  Message message{MessageType::kJob, job.op, id, 0, static_cast<uint32_t>(job.chunks.size())};
  for (size_t i = 0; i < job.chunks.size(); ++i) {
    message.chunks[i] = {job.chunks[i], job.slots.empty() ? 0 : job.slots[i] * blocks_per_chunk, job.versions[i]};
  }
  return message;
}

}  // namespace hugepin::cli
