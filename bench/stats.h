// Summaries of repeated measurements (the median, and the spread around it) and the thread CPU
// clock some of them are taken with.
#pragma once

#include <cstdint>
#include <vector>

namespace hugepin::bench {

struct Summary {
  double median = 0;
  double min = 0;
  double max = 0;
  // (max - min) / median: how far apart the repeats were.
  double spread() const { return median > 0 ? (max - min) / median : 0; }
};

Summary summarize(std::vector<double> samples);

// The p-th percentile (0..100) by nearest rank; `samples` need not be sorted.
double percentile(std::vector<double> samples, double p);

// CPU time the calling thread has used, in ns (CLOCK_THREAD_CPUTIME_ID): on a shared machine, wall
// time would count whoever else runs on the core.
int64_t thread_cpu_ns();

}  // namespace hugepin::bench
