#include "planner/plan_input.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>

#include "base/error.h"
#include "base/json_keys.h"
#include "base/pci_address.h"
#include "base/size.h"

namespace hugepin::planner {
namespace {

using Json = nlohmann::json;

constexpr size_t kShownEntries = 8;
constexpr size_t kShownChars = 64;

std::string scalar_text(const Json& value) {
  if (value.is_number_float() && !std::isfinite(value.get<double>())) {
    double number = value.get<double>();
    return std::isnan(number) ? "nan" : number < 0 ? "-inf" : "inf";
  }
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > kShownChars) text = text.substr(0, kShownChars) + "...";
  return text;
}

// The value as an error message shows it: scalars and short arrays of scalars as JSON, anything
// deeper by its kind only (never recursing: input may nest deeply).
std::string describe(const Json& value) {
  if (value.is_object()) return cat("an object of ", value.size(), " fields");
  if (!value.is_array()) return scalar_text(value);
  bool flat = std::all_of(value.begin(), value.end(), [](const Json& entry) { return entry.is_primitive(); });
  if (!flat) return cat("an array of ", value.size(), " entries");
  std::string text = "[";
  for (size_t i = 0; i < value.size() && i < kShownEntries; ++i) text += cat(i == 0 ? "" : ", ", scalar_text(value[i]));
  if (value.size() > kShownEntries) text += cat(", ... (", value.size(), " entries)");
  return text + "]";
}

[[noreturn]] void reject(const std::string& path, const Json& value, std::string_view why) {
  throw Error(cat(path, " = ", describe(value), ": ", why));
}

std::string field_path(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : cat(parent, ".", key);
}

std::string index_path(const std::string& parent, size_t index) { return cat(parent, "[", index, "]"); }

void require_object(const Json& value, const std::string& path, std::initializer_list<std::string_view> known) {
  if (!value.is_object()) reject(path.empty() ? "input" : path, value, "must be a JSON object");
  for (const auto& [key, field] : value.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string names;
      for (std::string_view name : known) names += cat(names.empty() ? "" : ", ", name);
      std::string quoted = Json(key).dump(-1, ' ', false, Json::error_handler_t::replace);
      reject(field_path(path, quoted.substr(1, quoted.size() - 2)), field, cat("unknown field (known: ", names, ")"));
    }
  }
}

const Json& required(const Json& object, const std::string& path, const char* key) {
  auto it = object.find(key);
  if (it == object.end()) throw Error(cat(field_path(path, key), ": missing"));
  return *it;
}

const Json* optional(const Json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

uint64_t integer(const Json& value, const std::string& path, uint64_t max) {
  if (value.is_number_unsigned()) {
    uint64_t number = value.get<uint64_t>();
    if (number > max) reject(path, value, cat("above the largest accepted value ", max));
    return number;
  }
  if (value.is_number_integer()) reject(path, value, "negative");
  reject(path, value, cat("must be an integer from 0 to ", max));
}

uint32_t integer32(const Json& value, const std::string& path) {
  return static_cast<uint32_t>(integer(value, path, std::numeric_limits<uint32_t>::max()));
}

uint64_t integer64(const Json& value, const std::string& path) {
  return integer(value, path, std::numeric_limits<uint64_t>::max());
}

std::string text(const Json& value, const std::string& path) {
  if (!value.is_string()) reject(path, value, "must be a string");
  return value.get<std::string>();
}

std::vector<uint64_t> integer_list(const Json& value, const std::string& path) {
  if (!value.is_array()) reject(path, value, "must be an array of integers");
  std::vector<uint64_t> numbers;
  numbers.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) numbers.push_back(integer64(value[i], index_path(path, i)));
  return numbers;
}

// An integer, or a float truncated toward zero (byte budgets written as 6.4e10).
uint64_t byte_budget(const Json& value, const std::string& path) {
  if (!value.is_number_float()) return integer64(value, path);
  double number = value.get<double>();
  if (!std::isfinite(number)) reject(path, value, "must be a finite number of bytes");
  if (number < 0) reject(path, value, "negative");
  // 2^64 is exact as a double; every double below it truncates into 64 bits.
  if (number >= 18446744073709551616.0) reject(path, value, "above 2^64-1 bytes");
  return static_cast<uint64_t>(number);
}

uint64_t page_size(const Json& value, const std::string& path) {
  std::string name = text(value, path);
  std::optional<uint64_t> size = parse_size(name);
  if (!size || (*size != 4 * kKiB && *size != 2 * kMiB && *size != kGiB)) reject(path, value, "must be 4K, 2M or 1G");
  return *size;
}

std::string pci_address(const Json& value, const std::string& path) {
  std::string address = text(value, path);
  try {
    return normalize_pci_address(address);
  } catch (const Error& error) {
    reject(path, value, error.what());
  }
}

TensorDescriptor parse_tensor(const Json& value, const std::string& path) {
  require_object(value, path,
                 {"name", "shape", "strides", "element_size", "storage", "storage_bytes", "group"});
  TensorDescriptor tensor;
  tensor.name = text(required(value, path, "name"), field_path(path, "name"));
  tensor.shape = integer_list(required(value, path, "shape"), field_path(path, "shape"));
  tensor.strides = integer_list(required(value, path, "strides"), field_path(path, "strides"));
  tensor.element_size = integer64(required(value, path, "element_size"), field_path(path, "element_size"));
  tensor.storage = text(required(value, path, "storage"), field_path(path, "storage"));
  if (tensor.storage.empty()) reject(field_path(path, "storage"), value["storage"], "must not be empty");
  if (const Json* bytes = optional(value, "storage_bytes")) {
    tensor.storage_bytes = integer64(*bytes, field_path(path, "storage_bytes"));
  }
  if (const Json* group = optional(value, "group")) tensor.group = integer32(*group, field_path(path, "group"));
  return tensor;
}

RankInput parse_rank(const Json& value, const std::string& path) {
  require_object(value, path, {"tp_rank", "pp_rank", "gpu_pci", "num_blocks", "tensors", "bytes_per_block"});
  RankInput rank;
  rank.tp_rank = integer32(required(value, path, "tp_rank"), field_path(path, "tp_rank"));
  rank.pp_rank = integer32(required(value, path, "pp_rank"), field_path(path, "pp_rank"));
  if (const Json* pci = optional(value, "gpu_pci")) rank.gpu_pci = pci_address(*pci, field_path(path, "gpu_pci"));
  rank.num_blocks = integer64(required(value, path, "num_blocks"), field_path(path, "num_blocks"));
  if (const Json* tensors = optional(value, "tensors")) {
    std::string tensors_path = field_path(path, "tensors");
    if (!tensors->is_array()) reject(tensors_path, *tensors, "must be an array of tensors");
    for (size_t i = 0; i < tensors->size(); ++i) {
      rank.tensors.push_back(parse_tensor((*tensors)[i], index_path(tensors_path, i)));
    }
  }
  if (const Json* bytes = optional(value, "bytes_per_block")) {
    rank.bytes_per_block = integer64(*bytes, field_path(path, "bytes_per_block"));
  }
  return rank;
}

PlanInput parse_document(const Json& document) {
  require_object(document, "",
                 {"tp", "pp", "dp", "pcp", "dcp", "blocks_per_chunk", "cpu_bytes", "page_size", "ranks"});
  PlanInput input;
  input.tp = integer32(required(document, "", "tp"), "tp");
  input.pp = integer32(required(document, "", "pp"), "pp");
  if (const Json* dp = optional(document, "dp")) input.dp = integer32(*dp, "dp");
  if (const Json* pcp = optional(document, "pcp")) input.pcp = integer32(*pcp, "pcp");
  if (const Json* dcp = optional(document, "dcp")) input.dcp = integer32(*dcp, "dcp");
  input.blocks_per_chunk = integer64(required(document, "", "blocks_per_chunk"), "blocks_per_chunk");
  input.cpu_bytes = byte_budget(required(document, "", "cpu_bytes"), "cpu_bytes");
  if (const Json* size = optional(document, "page_size")) input.page_size = page_size(*size, "page_size");
  const Json& ranks = required(document, "", "ranks");
  if (!ranks.is_array()) reject("ranks", ranks, "must be an array of ranks");
  for (size_t i = 0; i < ranks.size(); ++i) input.ranks.push_back(parse_rank(ranks[i], index_path("ranks", i)));
  return input;
}

}  // namespace

PlanInput parse_plan_input(std::string_view json_text) {
  Json document;
  try {
    document = Json::parse(json_text.begin(), json_text.end());
  } catch (const Json::exception& error) {
    throw Error(cat("input is not valid JSON: ", error.what()));
  }
  if (std::string key = first_duplicate_key(json_text); !key.empty()) {
    throw Error(cat(key, ": given twice (a plan names each field once; which one was meant?)"));
  }
  try {
    return parse_document(document);
  } catch (const Json::exception& error) {
    // The checks above leave nlohmann nothing to throw; should one slip through, it is still a
    // one-line Error about the input, not a crash.
    throw Error(cat("input: ", error.what()));
  }
}

}  // namespace hugepin::planner
