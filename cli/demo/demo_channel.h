// The demo engine's own dispatch channel, scheduler -> one worker: a SOCK_SEQPACKET socket
// pair, one message per job or step (in a real engine this is its RPC; hugepin only carries the
// reports back, through the rings).
#pragma once

#include <cstdint>
#include <vector>

namespace hugepin::demo {

enum class MessageType : uint32_t {
  kJob = 1,      // copy the listed chunks (kind: JobKind)
  kEndStep = 2,  // epoch `epoch` is queued: report compute-release once its copies are done
  kVerify = 3,   // check the listed chunks' host bytes (a replacement worker, after restart)
  kStop = 4,     // finish what is in flight, detach, exit
};

// What a job does with its chunks. The scheduler pins them all alike: loads and spills read host
// chunks (OffloadScheduler JobKind::kLoad), stores and restores write them (JobKind::kStore).
enum class DemoOp : uint32_t {
  kLoad = 0,     // host -> GPU
  kStore = 1,    // GPU -> host
  kSpill = 2,    // host -> disk
  kRestore = 3,  // disk -> host
};

struct ChunkCopy {
  uint64_t chunk = 0;
  uint64_t gpu_first_block = 0;  // the GPU blocks of this chunk: [first, first + blocks_per_chunk)
  uint64_t version = 0;          // stores: the version to write; loads and verify: the one expected
};

struct Message {
  MessageType type = MessageType::kStop;
  uint32_t kind = 0;   // DemoOp for kJob
  uint64_t job = 0;
  uint64_t epoch = 0;
  std::vector<ChunkCopy> chunks;
};

// Sends one message; throws Error on failure (EPIPE when the worker is gone).
void send_message(int fd, const Message& message);
// Receives one message when one is waiting; false when none is. Throws Error when the peer
// closed the channel or a message is malformed.
bool try_receive(int fd, Message* message);

}  // namespace hugepin::demo
