// The miniature engines' dispatch channel, scheduler -> one worker: a SOCK_SEQPACKET socket pair
// (RankProcesses), one fixed-size message per job or step. In a real engine this is its own RPC;
// hugepin carries only the way back, the reports on the rings.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstdint>

#include "base/error.h"
#include "cli/engine/chunk_cache.h"

namespace hugepin::cli {

enum class MessageType : uint32_t {
  kJob = 1,      // copy the listed chunks (op: CacheOp)
  kEndStep = 2,  // epoch `epoch` is queued: report compute-release once its copies are done
  kStop = 3,     // finish what is in flight, detach, exit
};

struct ChunkCopy {
  uint64_t chunk = 0;
  uint64_t gpu_first_block = 0;  // the GPU blocks of this chunk: [first, first + blocks_per_chunk)
  uint64_t version = 0;          // stores: the version to write; loads: the one expected
};

inline constexpr uint32_t kMaxChunksPerJob = 64;  // the CLI's --chunks-per-job limit

struct Message {
  MessageType type = MessageType::kStop;
  CacheOp op = CacheOp::kLoad;
  uint64_t job = 0;
  uint64_t epoch = 0;
  uint32_t count = 0;
  ChunkCopy chunks[kMaxChunksPerJob];
};

// The job message of `job` (a CacheJob dispatched as `id`), GPU slots as first blocks.
Message job_message(JobId id, const CacheJob& job, uint64_t blocks_per_chunk);

// Sends one message; throws Error on failure (EPIPE when the worker is gone).
inline void send_message(int fd, const Message& message) {
  ssize_t sent;
  while ((sent = ::send(fd, &message, sizeof message, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  if (sent != static_cast<ssize_t>(sizeof message)) throw_errno("sending to a worker", sent < 0 ? errno : EMSGSIZE);
}

// Receives one message when one is waiting; false when none is. Throws Error when the peer
// closed the channel or a message is malformed.
inline bool try_receive(int fd, Message* message) {
  const ssize_t got = ::recv(fd, message, sizeof *message, MSG_DONTWAIT);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
  if (got < 0) throw_errno("receiving a job message", errno);
  if (got == 0) throw Error("the scheduler closed the channel");
  if (got != sizeof *message || message->count > kMaxChunksPerJob) throw Error("malformed job message");
  return true;
}

}  // namespace hugepin::cli
