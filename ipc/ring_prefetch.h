#pragma once

// Which prefetch the report ring's producer issues for the slots past a batch
// (ReportRing::kPrefetchAhead): chosen when hugepin is configured, with the CMake option
// HUGEPIN_RING_PREFETCH, because machines differ in which is fastest (`hugepin bench ring` names
// the one built in, so that its figures say what they measured).

namespace hugepin {

// "write" (prefetchw, the default), "read" (prefetcht0) or "off".
const char* ring_prefetch_kind();

}  // namespace hugepin
