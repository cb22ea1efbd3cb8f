// hugepind's request protocol: one JSON object per line each way, over the Unix socket.
//
//   {"version": 1, "op": "create", "name": "kv", "size": "64G", "ranks": 8, "chunk": "2M",
//    "pagesize": "auto", "node": 0, "group": "vllm"}
//   {"version": 1, "op": "list"}          {"version": 1, "op": "status"}
//   {"version": 1, "op": "destroy", "name": "kv"}
//   {"version": 1, "op": "resize", "name": "kv", "size": "128G"}   (always refused, with the reason)
//
// Every reply is {"version": 1, "ok": true, ...} or {"version": 1, "ok": false, "error": "..."}.
// Sizes are numbers of bytes or strings with a suffix ("64G"). Unknown fields are refused by
// name (a typo must not be silently ignored). docs/daemon.md ("Requests") shows each reply.
//
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"

namespace hugepin::daemon {

using Json = nlohmann::ordered_json;

inline constexpr int kProtocolVersion = 1;

enum class Operation { kCreate, kList, kDestroy, kResize, kStatus };

// "create", "list", ...
std::string_view operation_name(Operation op);

struct Request {
  Operation op = Operation::kStatus;
  std::string name;             // create, destroy, resize
  uint64_t size = 0;            // create: total bytes over the ranks; resize: the size asked for
  uint32_t ranks = 0;           // create
  uint64_t chunk = 2 * 1024 * 1024;  // create
  uint64_t page_size = 0;       // create: 0 for auto, else 4K, 2M or 1G
  std::optional<int> node;      // create: every region on this NUMA node
  std::string group;            // create: share the arena with this group instead of the configured one
};

// A request the daemon cannot read: the message is the reply's error.
class ProtocolError : public Error {
 public:
  using Error::Error;
};

// Parses one request line (without its newline). Throws ProtocolError naming what is wrong: not
// JSON, not an object, no or another version, an unknown op, a missing, mistyped or unknown
// field, an invalid arena name, a size that does not parse.
Request parse_request(std::string_view line);

// The request as a JSON object (what clients send).
Json request_json(const Request& request);

// {"version": 1, "ok": true} and {"version": 1, "ok": false, "error": message}.
Json ok_reply();
Json error_reply(std::string_view message);

// `reply` as one line with its newline.
std::string reply_line(const Json& reply);

}  // namespace hugepin::daemon
