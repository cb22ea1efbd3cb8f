// The request protocol and authorisation: every malformed request is an error naming what is
// wrong, never a crash; who may ask for what.
#include "daemon/protocol.h"

#include <doctest/doctest.h>

#include <string>

#include "daemon/authorize.h"

namespace hugepin::daemon {
namespace {

std::string error_of(std::string_view line) {
  try {
    parse_request(line);
  } catch (const ProtocolError& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("requests parse with sizes as numbers or suffixed strings") {
  Request create = parse_request(
      R"({"version":1,"op":"create","name":"kv-1","size":"64G","ranks":8,"chunk":4194304,"pagesize":"2M","node":1,"group":"vllm"})");
  CHECK(create.op == Operation::kCreate);
  CHECK(create.name == "kv-1");
  CHECK(create.size == 64ULL << 30);
  CHECK(create.ranks == 8);
  CHECK(create.chunk == 4ULL << 20);
  CHECK(create.page_size == 2ULL << 20);
  CHECK(create.node == 1);
  CHECK(create.group == "vllm");
  Request defaults = parse_request(R"({"version":1,"op":"create","name":"a","size":1048576,"ranks":1})");
  CHECK(defaults.chunk == 2ULL << 20);
  CHECK(defaults.page_size == 0);
  CHECK_FALSE(defaults.node.has_value());
  CHECK(parse_request(R"({"version":1,"op":"list"})").op == Operation::kList);
  CHECK(parse_request(R"({"op":"status","version":1})").op == Operation::kStatus);
  CHECK(parse_request(R"({"version":1,"op":"destroy","name":"kv"})").name == "kv");
  CHECK(parse_request(R"({"version":1,"op":"resize","name":"kv","size":"2G"})").size == 2ULL << 30);
}

TEST_CASE("request_json is what parse_request reads") {
  Request request;
  request.op = Operation::kCreate;
  request.name = "kv";
  request.size = 1 << 30;
  request.ranks = 4;
  request.page_size = 4096;
  request.node = 0;
  Request back = parse_request(request_json(request).dump());
  CHECK(back.name == "kv");
  CHECK(back.size == request.size);
  CHECK(back.ranks == 4);
  CHECK(back.page_size == 4096);
  CHECK(back.node == 0);
}

// Issue 20, item 8: a key given twice silently took the last value.
TEST_CASE("a key given twice is refused by name, whichever value would have won") {
  CHECK(error_of(R"({"version":1,"op":"destroy","name":"kept","name":"victim"})") ==
        "'name' is given twice: name each field once");
  CHECK(error_of(R"({"version":1,"op":"create","name":"a","size":1,"ranks":1,"ranks":65536})") ==
        "'ranks' is given twice: name each field once");
  CHECK(error_of(R"({"version":1,"version":1,"op":"list"})") == "'version' is given twice: name each field once");
}

TEST_CASE("garbage, wrong shapes and unknown things are refused by name") {
  CHECK(error_of("hello") == "the request is not JSON (send one JSON object per line)");
  CHECK(error_of("{\"version\":1,") == "the request is not JSON (send one JSON object per line)");
  CHECK(error_of("[1,2]") == "the request must be a JSON object");
  CHECK(error_of("\"x\"") == "the request must be a JSON object");
  CHECK(error_of(R"({"op":"list"})") == "'version' is missing");
  CHECK(error_of(R"({"version":2,"op":"list"})").find("protocol version 2 is not supported") == 0);
  CHECK(error_of(R"({"version":"1","op":"list"})").find("protocol version \"1\" is not supported") == 0);
  CHECK(error_of(R"({"version":1})") == "'op' is missing");
  CHECK(error_of(R"({"version":1,"op":7})") == "'op' must be a string");
  CHECK(error_of(R"({"version":1,"op":"explode"})").find("unknown op 'explode'") == 0);
  CHECK(error_of(R"({"version":1,"op":"list","name":"x"})") == "unknown field 'name' for op 'list'");
  CHECK(error_of(R"({"version":1,"op":"create","name":"a","size":1,"rank":1})") == "unknown field 'rank' for op 'create'");
  CHECK(error_of(R"({"version":1,"op":"create","name":"a","size":1})") == "'ranks' is missing");
  CHECK(error_of(R"({"version":1,"op":"create","name":"../x","size":1,"ranks":1})").find("invalid arena name '../x'") == 0);
  CHECK(error_of(R"({"version":1,"op":"create","name":"a","size":"lots","ranks":1})").find("'size' = 'lots' is not a size") == 0);
  CHECK(error_of(R"({"version":1,"op":"create","name":"a","size":-5,"ranks":1})").find("'size' must be a size") == 0);
  CHECK(error_of(R"({"version":1,"op":"create","name":"a","size":0,"ranks":1})") == "'size' must be above zero");
  CHECK(error_of(R"({"version":1,"op":"create","name":"a","size":1,"ranks":0})") == "'ranks' = 0 is not from 1 to 65536");
  CHECK(error_of(R"({"version":1,"op":"create","name":"a","size":1,"ranks":1.5})") == "'ranks' must be a whole number");
  CHECK(error_of(R"({"version":1,"op":"create","name":"a","size":1,"ranks":1,"pagesize":"3M"})").find("'pagesize' = '3M'") == 0);
  CHECK(error_of(R"({"version":1,"op":"destroy"})") == "'name' is missing");
}

TEST_CASE("deep nesting and invalid UTF-8 are refused without a crash") {
  std::string deep(30000, '[');
  deep += std::string(30000, ']');
  CHECK(error_of(deep) == "the request must be a JSON object");
  std::string nested = R"({"version":1,"op":"list","x":)" + std::string(20000, '[') + std::string(20000, ']') + "}";
  CHECK(error_of(nested) == "unknown field 'x' for op 'list'");
  CHECK(error_of("{\"version\":1,\"op\":\"\xff\xfe\"}") == "the request is not JSON (send one JSON object per line)");
  // A reply echoing bytes that are not UTF-8 is still one line of valid JSON.
  std::string line = reply_line(error_reply(std::string("bad \xff byte")));
  CHECK(line.back() == '\n');
  CHECK(Json::parse(line)["ok"] == false);
}

TEST_CASE("replies carry the version and ok") {
  CHECK(ok_reply().dump() == R"({"version":1,"ok":true})");
  CHECK(error_reply("no").dump() == R"({"version":1,"ok":false,"error":"no"})");
}

TEST_CASE("root and group members may do anything; owners their own arenas; others nothing") {
  PeerCredentials root{10, 0, 0, {}};
  PeerCredentials member{11, 1000, 1000, {27, 4242}};
  PeerCredentials primary{12, 1001, 4242, {}};
  PeerCredentials stranger{13, 1002, 1002, {}};
  const std::optional<gid_t> group = 4242;
  CHECK(authorize(root, Operation::kCreate, "kv", std::nullopt, group).allowed);
  CHECK(authorize(root, Operation::kList, "", std::nullopt, std::nullopt).allowed);
  CHECK(authorize(member, Operation::kCreate, "kv", std::nullopt, group).allowed);
  CHECK(authorize(primary, Operation::kDestroy, "kv", 0, group).allowed);
  CHECK_FALSE(authorize(member, Operation::kCreate, "kv", std::nullopt, std::nullopt).allowed);

  Decision refused = authorize(stranger, Operation::kList, "", std::nullopt, group);
  CHECK_FALSE(refused.allowed);
  CHECK(refused.reason == "list is refused for uid 1002 (pid 13): only root, members of group 4242 may ask for it");
  CHECK_FALSE(authorize(stranger, Operation::kCreate, "kv", std::nullopt, group).allowed);
  CHECK_FALSE(authorize(stranger, Operation::kDestroy, "kv", 1000, group).allowed);
  Decision owner = authorize(stranger, Operation::kDestroy, "kv", 1002, group);
  CHECK(owner.allowed);
  CHECK(owner.reason == "owner of arena 'kv'");
  CHECK(authorize(stranger, Operation::kResize, "kv", 1002, std::nullopt).allowed);
  CHECK_FALSE(authorize(stranger, Operation::kStatus, "", 1002, std::nullopt).allowed);
  CHECK(authorize(stranger, Operation::kDestroy, "kv", std::nullopt, std::nullopt).reason.find("or the owner of arena 'kv'") !=
        std::string::npos);
}

}  // namespace hugepin::daemon
