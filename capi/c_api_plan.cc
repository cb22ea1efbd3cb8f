// The C ABI of plans and arenas.
#include <cerrno>
#include <cstring>

#include "capi/c_api_guard.h"
#include "capi/c_api_handles.h"
#include "hugepin/hugepin.h"
#include "ipc/arena_control.h"
#include "planner/plan_json.h"
#include "session/chunk_geometry.h"
#include "session/host_plan.h"
#include "session/planned_arena.h"

namespace hugepin::capi {

ArenaOptions arena_options_of(const hugepin_arena_options* given, const planner::CapacityPlan& plan,
                              ControlOptions* control) {
  const hugepin_arena_options options = read_options(given, hugepin_arena_options HUGEPIN_ARENA_OPTIONS_INIT,
                                                     "hugepin_arena_options");
  ArenaOptions out;
  out.page_size = options.page_size != 0 ? options.page_size : plan.page_size;
  out.strict = options.strict != 0;
  out.prefault_threads = options.prefault_threads;
  if (options.ring_capacity != 0) control->ring_capacity = options.ring_capacity;
  return out;
}

void fill_arena_info(const SegmentHeader& header, hugepin_arena_info* out) {
  out->tp = header.tp;
  out->pp = header.pp;
  out->ranks = header.rank_count;
  out->chunk_count = static_cast<uint32_t>(header.chunk_count);
  out->blocks_per_chunk = header.blocks_per_chunk;
  out->ring_capacity = header.ring_capacity;
  out->creator_pid = header.creator_pid;
}

}  // namespace hugepin::capi

using hugepin::capi::guarded;
using hugepin::capi::require;

extern "C" {

int hugepin_plan_from_json(const char* json, size_t length, hugepin_plan** out) {
  return guarded([&] {
    require(json, "json");
    require(out, "out");
    auto plan = std::make_unique<hugepin_plan>();
    plan->plan = hugepin::plan_on_host(hugepin::real_os(), std::string_view(json, length));
    hugepin::ChunkGeometry::of_plan(plan->plan);  // chunk ids must fit hugepin_chunk_id
    *out = plan.release();
    return 0;
  });
}

void hugepin_plan_free(hugepin_plan* plan) { delete plan; }

int hugepin_plan_get_info(const hugepin_plan* plan, hugepin_plan_info* out) {
  return guarded([&] {
    require(plan, "plan");
    require(out, "out");
    const hugepin::planner::CapacityPlan& p = plan->plan;
    *out = {p.tp, p.pp, static_cast<uint32_t>(p.chunk_count), p.blocks_per_chunk, p.page_size,
            p.payload_bytes_per_block, p.region_bytes};
    return 0;
  });
}

int hugepin_plan_to_json(const hugepin_plan* plan, char* buffer, size_t capacity, size_t* length) {
  return guarded([&] {
    require(plan, "plan");
    require(length, "length");
    const std::string text = hugepin::planner::plan_json(plan->plan).dump();
    *length = text.size();
    if (buffer == nullptr || capacity <= text.size()) {
      return hugepin::capi::fail(ENOSPC, hugepin::cat("the plan's JSON needs ", text.size() + 1, " bytes, the buffer has ",
                                                      buffer == nullptr ? 0 : capacity));
    }
    std::memcpy(buffer, text.c_str(), text.size() + 1);
    return 0;
  });
}

int hugepin_arena_create(const char* name, const hugepin_plan* plan, const hugepin_arena_options* options) {
  return guarded([&] {
    require(name, "name");
    require(plan, "plan");
    hugepin::ControlOptions control;
    hugepin::ArenaOptions where = hugepin::capi::arena_options_of(options, plan->plan, &control);
    hugepin::create_arena_with_control(hugepin::real_os(), name, hugepin::planned_arena(plan->plan).layout, where,
                                       control);
    return 0;
  });
}

int hugepin_arena_destroy(const char* name) {
  return guarded([&] {
    require(name, "name");
    hugepin::destroy_arena_with_control(hugepin::real_os(), name);
    return 0;
  });
}

int hugepin_arena_get_info(const char* name, hugepin_arena_info* out) {
  return guarded([&] {
    require(name, "name");
    require(out, "out");
    hugepin::check_arena_name(name);
    hugepin::ControlSegment segment =
        hugepin::ControlSegment::open(hugepin::real_os(), name, hugepin::SegmentAccess::kReadOnly);
    hugepin::capi::fill_arena_info(segment.header(), out);
    return 0;
  });
}

}  // extern "C"
