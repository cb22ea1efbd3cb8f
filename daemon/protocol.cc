#include "daemon/protocol.h"

#include <array>
#include <set>
#include <utility>

#include "base/json_keys.h"
#include "base/size.h"
#include "hugemem/naming.h"
#include "ipc/arena_layout.h"

namespace hugepin::daemon {
namespace {

constexpr std::array<std::pair<Operation, std::string_view>, 5> kOperations{{
    {Operation::kCreate, "create"},
    {Operation::kList, "list"},
    {Operation::kDestroy, "destroy"},
    {Operation::kResize, "resize"},
    {Operation::kStatus, "status"},
}};

// The fields each operation takes besides "version" and "op".
std::set<std::string_view> fields_of(Operation op) {
  switch (op) {
    case Operation::kCreate: return {"name", "size", "ranks", "chunk", "pagesize", "node", "group"};
    case Operation::kDestroy: return {"name"};
    case Operation::kResize: return {"name", "size"};
    case Operation::kList:
    case Operation::kStatus: return {};
  }
  return {};
}

[[noreturn]] void refuse(std::string_view why) { throw ProtocolError(std::string(why)); }

const Json& field(const Json& object, std::string_view key) {
  auto it = object.find(key);
  if (it == object.end()) refuse(cat("'", key, "' is missing"));
  return *it;
}

std::string text_field(const Json& object, std::string_view key) {
  const Json& value = field(object, key);
  if (!value.is_string()) refuse(cat("'", key, "' must be a string"));
  return value.get<std::string>();
}

uint64_t size_field(const Json& object, std::string_view key) {
  const Json& value = field(object, key);
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_string()) {
    if (std::optional<uint64_t> bytes = parse_size(value.get<std::string>())) return *bytes;
    refuse(cat("'", key, "' = '", value.get<std::string>(), "' is not a size (examples: 64G, 512M, 1048576)"));
  }
  refuse(cat("'", key, "' must be a size: a number of bytes or a string like \"64G\""));
}

int64_t integer_field(const Json& object, std::string_view key, int64_t min, int64_t max) {
  const Json& value = field(object, key);
  if (!value.is_number_integer()) refuse(cat("'", key, "' must be a whole number"));
  const auto number = value.get<int64_t>();
  if (number < min || number > max) refuse(cat("'", key, "' = ", number, " is not from ", min, " to ", max));
  return number;
}

uint64_t page_size_field(const Json& object) {
  const std::string text = text_field(object, "pagesize");
  if (text == "auto") return 0;
  std::optional<uint64_t> size = parse_size(text);
  if (!size || (*size != 4 * kKiB && *size != 2 * kMiB && *size != kGiB)) {
    refuse(cat("'pagesize' = '", text, "' is not a page size (use auto, 4K, 2M or 1G)"));
  }
  return *size;
}

Operation operation_of(const Json& object) {
  const std::string op = text_field(object, "op");
  for (auto [value, name] : kOperations) {
    if (name == op) return value;
  }
  refuse(cat("unknown op '", op.substr(0, 40), "' (create, list, destroy, resize, status)"));
}

void check_version(const Json& object) {
  const Json& version = field(object, "version");
  if (!version.is_number_integer() || version.get<int64_t>() != kProtocolVersion) {
    refuse(cat("protocol version ", version.dump().substr(0, 20), " is not supported (this hugepind speaks ",
               kProtocolVersion, ")"));
  }
}

void check_fields(const Json& object, Operation op) {
  const std::set<std::string_view> allowed = fields_of(op);
  for (const auto& [key, value] : object.items()) {
    if (key == "version" || key == "op" || allowed.count(key) != 0) continue;
    refuse(cat("unknown field '", std::string_view(key).substr(0, 40), "' for op '", operation_name(op), "'"));
  }
}

std::string arena_name_field(const Json& object) {
  std::string name = text_field(object, "name");
  if (!is_valid_arena_name(name)) {
    refuse(cat("invalid arena name '", std::string_view(name).substr(0, 80), "': use 1-", kMaxArenaNameLength,
               " letters, digits, '.', '_' or '-', not starting with '.'"));
  }
  return name;
}

}  // namespace

std::string_view operation_name(Operation op) {
  for (auto [value, name] : kOperations) {
    if (value == op) return name;
  }
  return "unknown";
}

Request parse_request(std::string_view line) {
  Json object = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded()) refuse("the request is not JSON (send one JSON object per line)");
  if (!object.is_object()) refuse("the request must be a JSON object");
  if (std::string key = first_duplicate_key(line); !key.empty()) {
    refuse(cat("'", key, "' is given twice: name each field once"));
  }
  check_version(object);
  Request request;
  request.op = operation_of(object);
  check_fields(object, request.op);
  switch (request.op) {
    case Operation::kCreate:
      request.name = arena_name_field(object);
      request.size = size_field(object, "size");
      if (request.size == 0) refuse("'size' must be above zero");
      request.ranks = static_cast<uint32_t>(integer_field(object, "ranks", 1, kMaxArenaRanks));
      if (object.contains("chunk")) request.chunk = size_field(object, "chunk");
      if (request.chunk == 0) refuse("'chunk' must be above zero");
      if (object.contains("pagesize")) request.page_size = page_size_field(object);
      if (object.contains("node")) request.node = static_cast<int>(integer_field(object, "node", 0, 4095));
      if (object.contains("group")) request.group = text_field(object, "group");
      break;
    case Operation::kDestroy:
      request.name = arena_name_field(object);
      break;
    case Operation::kResize:
      request.name = arena_name_field(object);
      request.size = size_field(object, "size");
      break;
    case Operation::kList:
    case Operation::kStatus:
      break;
  }
  return request;
}

Json request_json(const Request& request) {
  Json json{{"version", kProtocolVersion}, {"op", operation_name(request.op)}};
  switch (request.op) {
    case Operation::kCreate:
      json["name"] = request.name;
      json["size"] = request.size;
      json["ranks"] = request.ranks;
      json["chunk"] = request.chunk;
      json["pagesize"] = request.page_size == 0 ? std::string("auto") : page_size_name(request.page_size);
      if (request.node) json["node"] = *request.node;
      if (!request.group.empty()) json["group"] = request.group;
      break;
    case Operation::kDestroy:
      json["name"] = request.name;
      break;
    case Operation::kResize:
      json["name"] = request.name;
      json["size"] = request.size;
      break;
    case Operation::kList:
    case Operation::kStatus:
      break;
  }
  return json;
}

Json ok_reply() { return Json{{"version", kProtocolVersion}, {"ok", true}}; }

Json error_reply(std::string_view message) {
  return Json{{"version", kProtocolVersion}, {"ok", false}, {"error", message}};
}

std::string reply_line(const Json& reply) {
  // Replies carry arena names and paths the daemon read from the file system: replace bytes that
  // are not UTF-8 instead of throwing.
  std::string line = reply.dump(-1, ' ', false, Json::error_handler_t::replace);
  line.push_back('\n');
  return line;
}

}  // namespace hugepin::daemon
