// The ring stress harness shared by the process and the thread variants (DPDK's
// test_ring_stress_impl.h in spirit): one producer per ring pushes stamped records in random
// batches, mixing every push call; one consumer sleeps on the rings' shared doorbell, pops random
// batches and checks every record: its stamp, and that sequences are consecutive per ring. Counts
// are reconciled at the end. Fixed seeds: a failure replays.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/os.h"
#include "ipc/report_ring.h"

namespace hugepin::test {

struct StressConfig {
  uint32_t rings = 3;
  uint32_t capacity = 64;           // small, so that rings are full and wrap all the time
  uint64_t records_per_ring = 200'000;
  uint64_t seed = 1;
};

// One shared area: the doorbell, the rings, and what each producer says it sent.
struct StressArea {
  Doorbell* doorbell = nullptr;
  std::vector<ReportRing*> rings;
  uint64_t* sent = nullptr;  // one counter per ring, written by its producer when done
};

size_t stress_area_bytes(const StressConfig& config);
// REQUIRES: `memory` is 128-byte aligned and holds stress_area_bytes(config).
StressArea build_stress_area(void* memory, const StressConfig& config);

// The record a producer stamps at `sequence` (from 1) on ring `ring`: every field derived from
// (seed, ring, sequence).
Report stamp(uint64_t seed, uint32_t ring, uint64_t sequence);

// Pushes config.records_per_ring stamped records to area.rings[ring], then stores the count in
// area.sent[ring].
void run_producer(Os& os, const StressArea& area, uint32_t ring, const StressConfig& config);

struct StressResult {
  std::vector<uint64_t> received;  // per ring
  uint64_t bad_records = 0;        // a stamp that did not match, or a sequence out of order
  std::string first_error;         // "" when none
};

// Consumes until every producer's records have arrived (or nothing arrives for 30 s), checking each.
StressResult run_consumer(Os& os, const StressArea& area, const StressConfig& config);

}  // namespace hugepin::test
