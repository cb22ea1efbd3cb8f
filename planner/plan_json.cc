#include "planner/plan_json.h"

namespace hugepin::planner {
namespace {

using Json = nlohmann::ordered_json;

Json storage_json(const StorageLayout& storage) {
  return {{"storage", storage.storage},
          {"tensor", storage.tensor},
          {"group", storage.group},
          {"storage_bytes", storage.storage_bytes},
          {"outer_dim", storage.outer_dim},
          {"segments", storage.segments},
          {"segment_bytes_per_block", storage.segment_bytes_per_block},
          {"bytes_per_block", storage.bytes_per_block}};
}

Json rank_json(const RankPlan& rank) {
  Json groups = Json::array();
  for (const GroupPayload& group : rank.groups) {
    groups.push_back({{"group", group.group}, {"payload_bytes_per_block", group.bytes_per_block}});
  }
  Json storages = Json::array();
  for (const StorageLayout& storage : rank.layout.storages) storages.push_back(storage_json(storage));
  return {{"rank", rank.rank},
          {"tp_rank", rank.tp_rank},
          {"pp_rank", rank.pp_rank},
          {"gpu_pci", rank.gpu_pci.empty() ? Json(nullptr) : Json(rank.gpu_pci)},
          {"numa_node", rank.numa_node},
          {"num_blocks", rank.num_blocks},
          {"payload_bytes_per_block", rank.payload_bytes_per_block},
          {"payload_bytes", rank.payload_bytes},
          {"region_bytes", rank.region_bytes},
          {"rounding_bytes", rank.rounding_bytes},
          {"pages", rank.pages},
          {"groups", groups},
          {"storages", storages}};
}

Json need_json(const PoolNeed& need) {
  return {{"node", need.node},
          {"page_size", need.page_size},
          {"pages_needed", need.pages_needed},
          {"pages_available", need.pages_available ? Json(*need.pages_available) : Json(nullptr)},
          {"can_serve", need.can_serve},
          {"fix", need.fix}};
}

}  // namespace

nlohmann::ordered_json plan_json(const CapacityPlan& plan) {
  Json ranks = Json::array();
  for (const RankPlan& rank : plan.ranks) ranks.push_back(rank_json(rank));
  Json pool = Json::array();
  for (const PoolNeed& need : plan.pool) pool.push_back(need_json(need));
  Json json;
  json["version"] = kPlanJsonVersion;
  json["tp"] = plan.tp;
  json["pp"] = plan.pp;
  json["blocks_per_chunk"] = plan.blocks_per_chunk;
  json["cpu_bytes"] = plan.cpu_bytes;
  json["chunk_count"] = plan.chunk_count;
  json["payload_bytes_per_block"] = plan.payload_bytes_per_block;
  json["chunk_bytes"] = plan.chunk_bytes;
  json["payload_bytes"] = plan.payload_bytes;
  json["unused_bytes"] = plan.cpu_bytes - plan.payload_bytes;
  json["region_bytes"] = plan.region_bytes;
  json["rounding_bytes"] = plan.rounding_bytes;
  json["page_size"] = plan.page_size;
  json["page_size_choice"] = page_size_choice_name(plan.page_size_choice);
  json["pool_can_serve"] = plan.pool_can_serve;
  json["notes"] = plan.notes;
  json["groups"] = plan.groups;
  json["ranks"] = ranks;
  json["pool"] = pool;
  return json;
}

}  // namespace hugepin::planner
