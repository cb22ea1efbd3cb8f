#include "cli/demo/demo_channel.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace hugepin::demo {
namespace {

struct Header {
  uint32_t type;
  uint32_t kind;
  uint64_t job;
  uint64_t epoch;
  uint64_t count;
};

constexpr size_t kMaxChunks = 4096;

}  // namespace

void send_message(int fd, const Message& message) {
  if (message.chunks.size() > kMaxChunks) throw Error(cat("demo message with ", message.chunks.size(), " chunks"));
  std::vector<std::byte> buffer(sizeof(Header) + message.chunks.size() * sizeof(ChunkCopy));
  Header header{static_cast<uint32_t>(message.type), message.kind, message.job, message.epoch, message.chunks.size()};
  std::memcpy(buffer.data(), &header, sizeof header);
  if (!message.chunks.empty()) {
    std::memcpy(buffer.data() + sizeof header, message.chunks.data(), message.chunks.size() * sizeof(ChunkCopy));
  }
  for (;;) {
    ssize_t sent = ::send(fd, buffer.data(), buffer.size(), MSG_NOSIGNAL);
    if (sent == static_cast<ssize_t>(buffer.size())) return;
    if (sent < 0 && errno == EINTR) continue;
    throw_errno("sending to a demo worker", sent < 0 ? errno : EMSGSIZE);
  }
}

bool try_receive(int fd, Message* message) {
  std::vector<std::byte> buffer(sizeof(Header) + kMaxChunks * sizeof(ChunkCopy));
  ssize_t got = ::recv(fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
  if (got < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return false;
    throw_errno("receiving a demo message", errno);
  }
  if (got == 0) throw Error("the demo scheduler closed the channel");
  Header header{};
  if (static_cast<size_t>(got) < sizeof header) throw Error("short demo message");
  std::memcpy(&header, buffer.data(), sizeof header);
  if (header.count > kMaxChunks || static_cast<size_t>(got) != sizeof header + header.count * sizeof(ChunkCopy)) {
    throw Error("malformed demo message");
  }
  message->type = static_cast<MessageType>(header.type);
  message->kind = header.kind;
  message->job = header.job;
  message->epoch = header.epoch;
  message->chunks.resize(header.count);
  if (header.count > 0) std::memcpy(message->chunks.data(), buffer.data() + sizeof header, header.count * sizeof(ChunkCopy));
  return true;
}

}  // namespace hugepin::demo
