// What `hugepin bench offload` sends between its scheduler and its rank processes, over each
// rank's SOCK_SEQPACKET socket pair (cli/engine/rank_processes.h): fixed-size packets.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstdint>

#include "base/error.h"

namespace hugepin::bench {

// Scheduler -> rank.
enum class BenchOp : uint32_t {
  kJob = 1,        // the hugepin path: copy through the WorkerSession (reports on the ring)
  kEngineJob = 2,  // the engines' way: copy on the engine, poll its event, send a Completion back
  kEndStep = 3,    // release `value` (the hugepin path's compute-release)
  kBurst = 4,      // the copy engine alone: random copies for `seconds`; reply kBurstDone
  kStamp = 5,      // stamp every GPU slot s with its own stamp under tag `value`; reply kAck
  kTimings = 6,    // send the timings of the hugepin jobs that landed since the last kTimings
  kCheck = 7,      // check that each listed GPU slot holds the stamp of `origin` under `tag`; reply kAck
  kStop = 8,
};

// How a row mixes directions.
enum class Mix : uint32_t { kMixed = 0, kStore = 1, kLoad = 2 };

struct SlotCopy {
  uint64_t chunk = 0;   // kJob, kEngineJob: the host chunk
  uint64_t slot = 0;    // the GPU slot: device blocks slot * blocks_per_chunk ...
  uint64_t origin = 0;  // kCheck: the slot whose stamp it should hold
};

inline constexpr uint32_t kMaxCopiesPerPacket = 64;

struct BenchRequest {
  BenchOp op = BenchOp::kStop;
  uint32_t store = 0;           // kJob, kEngineJob: 1 store (GPU -> host), 0 load
  uint64_t job = 0;
  uint64_t value = 0;           // kEndStep: epoch; kStamp, kCheck: tag
  double seconds = 0;           // kBurst
  Mix mix = Mix::kMixed;        // kBurst
  uint32_t jobs_in_flight = 0;  // kBurst
  uint32_t chunks_per_job = 0;  // kBurst
  uint32_t count = 0;
  SlotCopy copies[kMaxCopiesPerPacket];
};

// Rank -> scheduler.
enum class BenchReplyKind : uint32_t {
  kCompletions = 1,  // the engines' way: jobs whose copies landed
  kTimings = 2,      // a batch of hugepin jobs' timings; the last batch has count < capacity
  kBurstDone = 3,    // bytes and seconds of a burst
  kAck = 4,          // failed = 0, or 1 with `message`
};

struct JobTiming {
  uint64_t job = 0;
  int64_t copy_ns = 0;      // the copies' own time on the GPU (events)
  int64_t gpu_done_ns = 0;  // when they ended, on CLOCK_MONOTONIC
  int64_t landed_ns = 0;    // when the rank learned it (hugepin: its completion call; engine way: its poll)
  int64_t gpu_done_window_ns = 0;  // gpu_done_ns is right to within half of this (CopyEngine::MarkSpan)
};

inline constexpr uint32_t kMaxTimingsPerPacket = 512;

struct BenchReply {
  BenchReplyKind kind = BenchReplyKind::kAck;
  uint32_t rank = 0;
  uint32_t count = 0;
  uint32_t failed = 0;
  uint64_t bytes = 0;    // kBurstDone
  double seconds = 0;    // kBurstDone
  char message[240] = {};
  JobTiming timings[kMaxTimingsPerPacket];
};

// One packet each way; throws Error (EPIPE when the peer is gone). receive() blocks when `wait`.
template <typename Packet>
void send_packet(int fd, const Packet& packet) {
  ssize_t sent;
  while ((sent = ::send(fd, &packet, sizeof packet, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  if (sent != static_cast<ssize_t>(sizeof packet)) throw_errno("sending a benchmark packet", sent < 0 ? errno : EMSGSIZE);
}

template <typename Packet>
bool receive_packet(int fd, Packet* packet, bool wait) {
  ssize_t got;
  while ((got = ::recv(fd, packet, sizeof *packet, wait ? 0 : MSG_DONTWAIT)) < 0 && errno == EINTR) {
  }
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
  if (got < 0) throw_errno("receiving a benchmark packet", errno);
  if (got == 0) throw Error("the other end of a benchmark channel is gone");
  if (got != sizeof *packet) throw Error(cat("a benchmark packet of ", got, " bytes, expected ", sizeof *packet));
  return true;
}

}  // namespace hugepin::bench
