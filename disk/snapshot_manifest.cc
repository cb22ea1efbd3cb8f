#include "disk/snapshot_manifest.h"

#include <nlohmann/json.hpp>

#include <set>

#include "base/error.h"
#include "hugemem/naming.h"

namespace hugepin {
namespace {

using Json = nlohmann::ordered_json;
constexpr std::string_view kFormat = "hugepin-snapshot";

// Reads field `name` of `object` as T, or throws naming it.
template <typename T>
T field(const Json& object, const std::string& name, const std::string& where) {
  auto it = object.find(name);
  if (it == object.end()) throw Error(cat(where, ": field '", name, "' is missing"));
  bool fits = false;
  if constexpr (std::is_same_v<T, std::string>) {
    fits = it->is_string();
  } else if constexpr (std::is_unsigned_v<T>) {
    fits = it->is_number_unsigned();
  } else {
    fits = it->is_number_integer();
  }
  if (!fits) throw Error(cat(where, ": field '", name, "' has the wrong type (", it->type_name(), ")"));
  return it->get<T>();
}

RegionManifest region_from_json(const Json& json, uint64_t generation, const std::string& source, size_t index) {
  const std::string where = cat(source, ": regions[", index, "]");
  if (!json.is_object()) throw Error(cat(where, " is not an object"));
  RegionManifest region;
  region.rank = field<uint32_t>(json, "rank", where);
  region.bytes = field<uint64_t>(json, "bytes", where);
  region.page_size = field<uint64_t>(json, "page_size", where);
  region.chunk_bytes = field<uint64_t>(json, "chunk_bytes", where);
  region.chunks = field<uint64_t>(json, "chunks", where);
  region.file = field<std::string>(json, "file", where);
  if (region.bytes == 0) throw Error(cat(where, ": field 'bytes' is 0"));
  if (region.chunk_bytes == 0) throw Error(cat(where, ": field 'chunk_bytes' is 0"));
  const uint64_t expected_chunks = region.bytes / region.chunk_bytes + (region.bytes % region.chunk_bytes != 0 ? 1 : 0);
  if (region.chunks != expected_chunks) {
    throw Error(cat(where, ": field 'chunks' is ", region.chunks, "; ", region.bytes, " bytes in chunks of ",
                    region.chunk_bytes, " make ", expected_chunks));
  }
  if (region.file != snapshot_data_file_name(generation, region.rank)) {
    throw Error(cat(where, ": field 'file' is '", region.file, "', not '", snapshot_data_file_name(generation, region.rank),
                    "'"));
  }
  auto crcs = json.find("crc32c");
  if (crcs == json.end() || !crcs->is_array()) throw Error(cat(where, ": field 'crc32c' is missing or not a list"));
  if (crcs->size() != region.chunks) {
    throw Error(cat(where, ": field 'crc32c' has ", crcs->size(), " values for ", region.chunks, " chunks"));
  }
  region.crc32c.reserve(crcs->size());
  for (const Json& crc : *crcs) {
    if (!crc.is_number_unsigned() || crc.get<uint64_t>() > 0xffffffffu) {
      throw Error(cat(where, ": field 'crc32c' holds '", crc.dump(), "', not a 32-bit checksum"));
    }
    region.crc32c.push_back(crc.get<uint32_t>());
  }
  return region;
}

}  // namespace

std::string snapshot_data_dir_name(uint64_t generation) { return cat("data-", generation); }

std::string snapshot_data_file_name(uint64_t generation, uint32_t rank) {
  return cat(snapshot_data_dir_name(generation), "/rank-", rank, ".data");
}

std::string manifest_to_json(const SnapshotManifest& manifest) {
  Json regions = Json::array();
  for (const RegionManifest& region : manifest.regions) {
    regions.push_back({{"rank", region.rank},
                       {"bytes", region.bytes},
                       {"page_size", region.page_size},
                       {"chunk_bytes", region.chunk_bytes},
                       {"chunks", region.chunks},
                       {"file", region.file},
                       {"crc32c", region.crc32c}});
  }
  Json json{{"format", kFormat},
            {"format_version", manifest.format_version},
            {"layout_version", manifest.layout_version},
            {"arena", manifest.arena},
            {"generation", manifest.generation},
            {"created_unix", manifest.created_unix},
            {"plan", manifest.plan ? Json(*manifest.plan) : Json(nullptr)},
            {"regions", std::move(regions)}};
  return json.dump(1) + "\n";
}

SnapshotManifest manifest_from_json(std::string_view text, const std::string& source) {
  Json json = Json::parse(text, nullptr, false);
  if (json.is_discarded() || !json.is_object()) throw Error(cat(source, " is not a JSON object: not a hugepin snapshot manifest"));
  if (json.value("format", std::string()) != kFormat) {
    throw Error(cat(source, ": field 'format' is not '", kFormat, "': not a hugepin snapshot manifest"));
  }
  SnapshotManifest manifest;
  manifest.format_version = field<int>(json, "format_version", source);
  if (manifest.format_version != kSnapshotFormatVersion) {
    throw Error(cat(source, ": field 'format_version' is ", manifest.format_version, "; this hugepin reads ",
                    kSnapshotFormatVersion));
  }
  manifest.layout_version = field<int>(json, "layout_version", source);
  if (manifest.layout_version != kSnapshotLayoutVersion) {
    throw Error(cat(source, ": field 'layout_version' is ", manifest.layout_version, "; this hugepin reads ",
                    kSnapshotLayoutVersion));
  }
  manifest.arena = field<std::string>(json, "arena", source);
  if (!is_valid_arena_name(manifest.arena)) throw Error(cat(source, ": field 'arena' is not an arena name"));
  manifest.generation = field<uint64_t>(json, "generation", source);
  manifest.created_unix = field<int64_t>(json, "created_unix", source);
  auto plan = json.find("plan");
  if (plan == json.end() || !(plan->is_null() || plan->is_string())) {
    throw Error(cat(source, ": field 'plan' is missing or neither null nor text"));
  }
  if (plan->is_string()) manifest.plan = plan->get<std::string>();
  auto regions = json.find("regions");
  if (regions == json.end() || !regions->is_array() || regions->empty()) {
    throw Error(cat(source, ": field 'regions' is missing, not a list, or empty"));
  }
  std::set<uint32_t> ranks;
  for (size_t i = 0; i < regions->size(); ++i) {
    manifest.regions.push_back(region_from_json((*regions)[i], manifest.generation, source, i));
    if (!ranks.insert(manifest.regions.back().rank).second) {
      throw Error(cat(source, ": regions[", i, "]: rank ", manifest.regions.back().rank, " appears twice"));
    }
  }
  return manifest;
}

}  // namespace hugepin
