/*
 * Prints, as JSON, what a C compiler makes of hugepin.h's structures: each one's size and the
 * offset and size of every field, and the header's version. test_abi_layout.py compares them with
 * the ctypes structures of hugepin/_abi.py, so a field added to the header and not to the package
 * (or laid out differently) fails a test instead of corrupting memory.
 */
#include <stddef.h>
#include <stdio.h>

#include <hugepin/hugepin.h>

static int first_struct = 1;
static int first_field = 1;

static void begin(const char* name, size_t size) {
  printf("%s\n  \"%s\": {\"size\": %zu, \"fields\": {", first_struct ? "" : ",", name, size);
  first_struct = 0;
  first_field = 1;
}

static void field(const char* name, size_t offset, size_t size) {
  printf("%s\"%s\": [%zu, %zu]", first_field ? "" : ", ", name, offset, size);
  first_field = 0;
}

static void end(void) { printf("}}"); }

#define FIELD(type, name) field(#name, offsetof(type, name), sizeof(((type*)0)->name))

int main(void) {
  printf("{\"version\": [%d, %d, %d], \"structures\": {", HUGEPIN_VERSION_MAJOR, HUGEPIN_VERSION_MINOR,
         HUGEPIN_VERSION_PATCH);
  begin("hugepin_plan_info", sizeof(hugepin_plan_info));
  FIELD(hugepin_plan_info, tp);
  FIELD(hugepin_plan_info, pp);
  FIELD(hugepin_plan_info, chunk_count);
  FIELD(hugepin_plan_info, blocks_per_chunk);
  FIELD(hugepin_plan_info, page_size);
  FIELD(hugepin_plan_info, payload_bytes_per_block);
  FIELD(hugepin_plan_info, region_bytes);
  end();
  begin("hugepin_arena_options", sizeof(hugepin_arena_options));
  FIELD(hugepin_arena_options, struct_size);
  FIELD(hugepin_arena_options, ring_capacity);
  FIELD(hugepin_arena_options, page_size);
  FIELD(hugepin_arena_options, strict);
  FIELD(hugepin_arena_options, prefault_threads);
  end();
  begin("hugepin_arena_info", sizeof(hugepin_arena_info));
  FIELD(hugepin_arena_info, tp);
  FIELD(hugepin_arena_info, pp);
  FIELD(hugepin_arena_info, ranks);
  FIELD(hugepin_arena_info, chunk_count);
  FIELD(hugepin_arena_info, blocks_per_chunk);
  FIELD(hugepin_arena_info, ring_capacity);
  FIELD(hugepin_arena_info, creator_pid);
  end();
  begin("hugepin_region_info", sizeof(hugepin_region_info));
  FIELD(hugepin_region_info, base);
  FIELD(hugepin_region_info, length);
  FIELD(hugepin_region_info, page_size);
  FIELD(hugepin_region_info, numa_node);
  FIELD(hugepin_region_info, pinned);
  FIELD(hugepin_region_info, device);
  FIELD(hugepin_region_info, rank);
  FIELD(hugepin_region_info, segments);
  end();
  begin("hugepin_segment_info", sizeof(hugepin_segment_info));
  FIELD(hugepin_segment_info, bytes_per_block);
  FIELD(hugepin_segment_info, host_offset);
  FIELD(hugepin_segment_info, host_block_stride);
  FIELD(hugepin_segment_info, host_blocks);
  end();
  begin("hugepin_worker_options", sizeof(hugepin_worker_options));
  FIELD(hugepin_worker_options, struct_size);
  FIELD(hugepin_worker_options, copy_threads);
  FIELD(hugepin_worker_options, post_timeout_ns);
  FIELD(hugepin_worker_options, time_copies);
  FIELD(hugepin_worker_options, completion_poll_ns);
  FIELD(hugepin_worker_options, time_copies_every);
  end();
  begin("hugepin_device_segment", sizeof(hugepin_device_segment));
  FIELD(hugepin_device_segment, device_base);
  FIELD(hugepin_device_segment, block_stride);
  FIELD(hugepin_device_segment, blocks);
  FIELD(hugepin_device_segment, bytes_per_block);
  end();
  begin("hugepin_block_pair", sizeof(hugepin_block_pair));
  FIELD(hugepin_block_pair, src);
  FIELD(hugepin_block_pair, dst);
  end();
  begin("hugepin_job_result", sizeof(hugepin_job_result));
  FIELD(hugepin_job_result, job);
  FIELD(hugepin_job_result, error);
  FIELD(hugepin_job_result, kind);
  FIELD(hugepin_job_result, bytes);
  FIELD(hugepin_job_result, launch_ns);
  FIELD(hugepin_job_result, landed_ns);
  FIELD(hugepin_job_result, copy_ns);
  FIELD(hugepin_job_result, gpu_done_ns);
  end();
  begin("hugepin_scheduler_options", sizeof(hugepin_scheduler_options));
  FIELD(hugepin_scheduler_options, struct_size);
  FIELD(hugepin_scheduler_options, max_jobs_in_flight);
  FIELD(hugepin_scheduler_options, waive_compute_barrier);
  FIELD(hugepin_scheduler_options, keep_arena);
  FIELD(hugepin_scheduler_options, heartbeat_timeout_ns);
  end();
  begin("hugepin_failed_job", sizeof(hugepin_failed_job));
  FIELD(hugepin_failed_job, job);
  FIELD(hugepin_failed_job, kind);
  FIELD(hugepin_failed_job, rank);
  FIELD(hugepin_failed_job, cause);
  FIELD(hugepin_failed_job, error);
  FIELD(hugepin_failed_job, message);
  end();
  begin("hugepin_scheduler_figures", sizeof(hugepin_scheduler_figures));
  FIELD(hugepin_scheduler_figures, live_ranks);
  FIELD(hugepin_scheduler_figures, pinned_chunks);
  FIELD(hugepin_scheduler_figures, quarantined_chunks);
  FIELD(hugepin_scheduler_figures, jobs_waiting);
  FIELD(hugepin_scheduler_figures, current_epoch);
  FIELD(hugepin_scheduler_figures, all_rank_epoch);
  FIELD(hugepin_scheduler_figures, jobs_dispatched);
  FIELD(hugepin_scheduler_figures, jobs_completed);
  FIELD(hugepin_scheduler_figures, jobs_failed);
  FIELD(hugepin_scheduler_figures, reports_applied);
  FIELD(hugepin_scheduler_figures, reports_rejected);
  end();
  printf("}, \"constants\": {\"HUGEPIN_COMPLETION_SPIN\": %lld}}\n", (long long)HUGEPIN_COMPLETION_SPIN);
  return 0;
}
