#include "bench/ring_bench.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/lockfree/spsc_queue.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>
#include <thread>

#include "base/cpu_relax.h"
#include "base/error.h"
#include "bench/baseline/report_ring_v1.h"
#include "ipc/doorbell.h"
#include "ipc/report_ring.h"

namespace hugepin::bench {
namespace {

using BoostQueue = boost::lockfree::spsc_queue<Report, boost::lockfree::capacity<kRingBenchCapacity>>;
using baseline::ReportRingV1;

// What the two processes share besides the queue: a start line.
struct alignas(kCacheLinePair) StartLine {
  std::atomic<uint32_t> producer_ready{0};
  alignas(kCacheLinePair) std::atomic<uint32_t> go{0};

  void reset() {
    producer_ready.store(0, std::memory_order_relaxed);
    go.store(0, std::memory_order_relaxed);
  }
};

// The queues under test, behind one interface: push and pop batches, spinning, no waiting. Each
// holds a pointer and calls the queue's own batch calls, nothing else.
struct Ours {
  Os* os;
  ReportRing* ring;
  bool sleeping_consumer = false;
  uint32_t push(const Report* reports, uint32_t n) { return ring->push_batch(*os, reports, n); }
  uint32_t pop(Report* out, uint32_t n) {
    return sleeping_consumer ? ring->pop_wait(*os, out, n, -1, /*spins=*/0) : ring->pop_batch(*os, out, n);
  }
};

struct Baseline {
  Os* os;
  ReportRingV1* ring;
  uint32_t push(const Report* reports, uint32_t n) { return ring->push_batch(*os, reports, n); }
  uint32_t pop(Report* out, uint32_t n) { return ring->pop_batch(*os, out, n); }
};

struct Boost {
  BoostQueue* queue;
  uint32_t push(const Report* reports, uint32_t n) { return static_cast<uint32_t>(queue->push(reports, n)); }
  uint32_t pop(Report* out, uint32_t n) { return static_cast<uint32_t>(queue->pop(out, n)); }
};

// One MAP_SHARED anonymous mapping: the start line, then the queue.
class SharedArea {
 public:
  explicit SharedArea(size_t queue_bytes) : bytes_(sizeof(StartLine) + queue_bytes) {
    void* memory = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) throw_errno("cannot map the benchmark's shared memory", errno);
    memory_ = static_cast<std::byte*>(memory);
    start_ = new (memory_) StartLine;
  }
  ~SharedArea() { munmap(memory_, bytes_); }
  SharedArea(const SharedArea&) = delete;
  SharedArea& operator=(const SharedArea&) = delete;

  StartLine& start() { return *start_; }
  // The queue's memory, zeroed: every queue starts from the same state of the caches (all of it
  // written by this process, the consumer), whatever ran there before.
  std::byte* fresh_queue_memory() {
    std::memset(memory_ + sizeof(StartLine), 0, bytes_ - sizeof(StartLine));
    return queue_memory();
  }
  // The queue's memory as the last run left it.
  std::byte* queue_memory() { return memory_ + sizeof(StartLine); }

 private:
  size_t bytes_;
  std::byte* memory_;
  StartLine* start_;
};

void pin(Os& os, int cpu) {
  if (cpu < 0) return;
  if (int rc = os.set_thread_cpus({cpu}); rc < 0) throw_errno(cat("ring benchmark: cannot run on CPU ", cpu), -rc);
}

// The child's side of a run: wait for the start, produce, exit. Never returns.
template <typename Queue, typename Produce>
[[noreturn]] void producer_process(Os& os, StartLine& start, int cpu, Queue queue, Produce produce) {
  pin(os, cpu);
  start.producer_ready.store(1, std::memory_order_release);  // pairs with the acquire spin in start_producer
  while (start.go.load(std::memory_order_acquire) == 0) cpu_relax();  // pairs with the release store of go
  produce(queue);
  _exit(0);
}

template <typename Queue, typename Produce>
pid_t start_producer(Os& os, StartLine& start, int cpu, Queue queue, Produce produce) {
  pid_t pid = fork();
  if (pid < 0) throw_errno("fork", errno);
  if (pid == 0) producer_process(os, start, cpu, queue, produce);
  // The child starts on this process's CPU until it pins itself: yield, not spin, so that it
  // runs even under a real-time policy (chrt -f), where a spinning parent would starve it.
  while (start.producer_ready.load(std::memory_order_acquire) == 0) {  // pairs with the child's release
    std::this_thread::yield();
  }
  return pid;
}

void finish_producer(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw Error(cat("ring benchmark: the producer process ", pid, " failed"));
  }
}

// Pushes reports 1..count in batches of `batch`, spinning while the queue is full.
template <typename Queue>
void produce_all(Queue& queue, uint64_t count, uint32_t batch) {
  std::vector<Report> reports(batch, Report{ReportKind::kCopyComplete, 0, 0, 0, 0, 0});
  for (uint64_t next = 1; next <= count;) {
    const auto n = static_cast<uint32_t>(std::min<uint64_t>(batch, count - next + 1));
    for (uint32_t i = 0; i < n; ++i) {
      reports[i].sequence = next + i;
      reports[i].value = next + i;
    }
    for (uint32_t done = 0; done < n;) {
      uint32_t pushed = queue.push(reports.data() + done, n - done);
      if (pushed == 0) cpu_relax();
      done += pushed;
    }
    next += n;
  }
}

// Pops `count` reports in batches of `batch`, checking that their values run 1..count (not the
// sequences: our ring writes those itself).
template <typename Queue>
void consume_all(Queue& queue, uint64_t count, uint32_t batch) {
  std::vector<Report> out(batch);
  for (uint64_t expected = 1; expected <= count;) {
    uint32_t n = queue.pop(out.data(), batch);
    if (n == 0) cpu_relax();
    for (uint32_t i = 0; i < n; ++i, ++expected) {
      if (out[i].value != expected) {
        throw Error(cat("ring benchmark: report ", out[i].value, " arrived where ", expected, " was due"));
      }
    }
  }
}

template <typename Queue>
double throughput_run(Os& os, SharedArea& area, Queue queue, uint64_t count, uint32_t batch, int producer_cpu) {
  area.start().reset();
  pid_t pid = start_producer(os, area.start(), producer_cpu, queue,
                             [count, batch](Queue& q) { produce_all(q, count, batch); });
  const int64_t begin = os.monotonic_ns();
  area.start().go.store(1, std::memory_order_release);
  consume_all(queue, count, batch);
  const int64_t end = os.monotonic_ns();
  finish_producer(pid);
  return static_cast<double>(count) * 1e9 / static_cast<double>(end - begin);
}

struct Latency {
  double p50 = 0;
  double p99 = 0;
  double max = 0;
};

template <typename Queue>
Latency latency_run(Os& os, SharedArea& area, Queue queue, uint64_t samples, uint64_t interval_ns, int producer_cpu) {
  area.start().reset();
  auto produce = [&os, samples, interval_ns](Queue& q) {
    int64_t next = os.monotonic_ns();
    for (uint64_t i = 1; i <= samples; ++i) {
      while (os.monotonic_ns() < next) cpu_relax();
      Report report{ReportKind::kHeartbeat, 0, 0, i, i, static_cast<uint64_t>(os.monotonic_ns())};
      while (q.push(&report, 1) == 0) cpu_relax();
      next += static_cast<int64_t>(interval_ns);
    }
  };
  pid_t pid = start_producer(os, area.start(), producer_cpu, queue, produce);
  area.start().go.store(1, std::memory_order_release);
  std::vector<double> latencies;
  latencies.reserve(samples);
  Report report{};
  for (uint64_t received = 0; received < samples;) {
    if (queue.pop(&report, 1) == 0) {
      cpu_relax();
      continue;
    }
    const int64_t now = os.monotonic_ns();
    ++received;
    if (report.value != received) throw Error(cat("ring benchmark: latency report ", report.value, " out of order"));
    latencies.push_back(static_cast<double>(now - static_cast<int64_t>(report.time_ns)));
  }
  finish_producer(pid);
  // The first 1% warm caches and the CPUs' clocks: left out.
  latencies.erase(latencies.begin(), latencies.begin() + static_cast<std::ptrdiff_t>(latencies.size() / 100));
  Latency latency;
  latency.p50 = percentile(latencies, 50);
  latency.p99 = percentile(latencies, 99);
  latency.max = percentile(latencies, 100);
  return latency;
}

// A CPU's {package, core} from sysfs; {-1, -1} when the kernel does not say.
std::pair<int, int> core_of(Os& os, int cpu) {
  auto read_int = [&os, cpu](const char* name) {
    std::string text;
    if (os.read_file(cat("/sys/devices/system/cpu/cpu", cpu, "/topology/", name), &text) < 0) return -1;
    try {
      return std::stoi(text);
    } catch (const std::exception&) {
      return -1;
    }
  };
  return {read_int("physical_package_id"), read_int("core_id")};
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

CpuPair pick_cpus(Os& os, const std::vector<int>& requested) {
  auto core = [&os](int cpu) { return core_of(os, cpu); };
  if (requested.empty()) return choose_ring_cpus(allowed_cpus(), core);
  if (requested.size() != 2 || requested[0] == requested[1]) {
    throw Error("ring benchmark: --cpus takes two different CPUs: PRODUCER,CONSUMER");
  }
  const std::pair<int, int> producer = core(requested[0]);
  const std::pair<int, int> consumer = core(requested[1]);
  CoreSharing sharing = CoreSharing::kUnknown;
  if (producer.second >= 0 && consumer.second >= 0) {
    sharing = producer == consumer ? CoreSharing::kSmtSiblings : CoreSharing::kDifferentCores;
  }
  return CpuPair{requested[0], requested[1], sharing};
}

// A pause before each measurement: caches and the scheduler settle, and a real-time policy's
// budget (chrt; 950 ms per second by default) is not spent across runs.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(200)); }

const char* method_name(RingMethod method) {
  switch (method) {
    case RingMethod::kOurs: return "hugepin ReportRing";
    case RingMethod::kBaseline: return "ReportRing v1 (baseline)";
    case RingMethod::kBoost: return "Boost.Lockfree spsc_queue";
  }
  return "?";
}

// Builds a fresh queue of `method` in the area and hands it to `measure`, which takes any queue.
template <typename Measure>
auto with_queue(Os& os, SharedArea& area, RingMethod method, bool sleeping, Measure measure) {
  std::byte* memory = area.fresh_queue_memory();
  switch (method) {
    case RingMethod::kBaseline: return measure(Baseline{&os, ReportRingV1::init(memory, kRingBenchCapacity)});
    case RingMethod::kBoost: return measure(Boost{new (memory) BoostQueue});
    case RingMethod::kOurs: break;
  }
  return measure(Ours{&os, ReportRing::init(memory, kRingBenchCapacity), sleeping});
}

struct Run {
  Os& os;
  SharedArea& area;
  int producer_cpu;

  double throughput(RingMethod method, bool sleeping, uint64_t count, uint32_t batch) {
    settle();
    return with_queue(os, area, method, sleeping,
                      [&](auto queue) { return throughput_run(os, area, queue, count, batch, producer_cpu); });
  }
  Latency latency(RingMethod method, bool sleeping, uint64_t samples, uint64_t interval_ns) {
    settle();
    return with_queue(os, area, method, sleeping,
                      [&](auto queue) { return latency_run(os, area, queue, samples, interval_ns, producer_cpu); });
  }
};

void set_latency(RingBenchRow& row, const Latency& latency) {
  row.latency_p50_ns = latency.p50;
  row.latency_p99_ns = latency.p99;
  row.latency_max_ns = latency.max;
}

constexpr RingMethod kMethods[] = {RingMethod::kOurs, RingMethod::kBaseline, RingMethod::kBoost};

// The three rows of one batch size: throughput repeats in rotating order, then latency at batch 1.
std::vector<RingBenchRow> measure_batch(Run& run, const RingBenchOptions& options, uint32_t batch,
                                        const std::function<void(const std::string&)>& progress) {
  std::vector<RingBenchRow> rows;
  std::vector<std::vector<double>> rates(std::size(kMethods));
  for (RingMethod method : kMethods) rows.push_back(RingBenchRow{method_name(method), method, false, batch});
  for (unsigned repeat = 0; repeat < options.repeat; ++repeat) {
    for (size_t k = 0; k < std::size(kMethods); ++k) {
      const size_t m = (repeat + k) % std::size(kMethods);  // each repeat starts with the next method
      progress(cat("batch ", batch, ", run ", repeat + 1, " of ", options.repeat, ": ", rows[m].method));
      rates[m].push_back(run.throughput(kMethods[m], false, options.count, batch));
    }
  }
  for (size_t m = 0; m < rows.size(); ++m) rows[m].reports_per_second = summarize(rates[m]);
  if (batch == 1) {
    for (size_t m = 0; m < rows.size(); ++m) {
      progress(cat("latency: ", rows[m].method));
      set_latency(rows[m], run.latency(kMethods[m], false, options.latency_samples, options.latency_interval_ns));
    }
  }
  return rows;
}

// Our ring with a consumer that sleeps on the doorbell whenever the ring is empty.
RingBenchRow measure_sleeping(Run& run, const RingBenchOptions& options,
                              const std::function<void(const std::string&)>& progress) {
  RingBenchRow row{"hugepin ReportRing, consumer sleeps", RingMethod::kOurs, true, 1};
  const uint64_t count = std::max<uint64_t>(1, options.count / 4);  // a system call per wake: slower
  std::vector<double> rates;
  uint64_t wakes = 0;
  for (unsigned repeat = 0; repeat < options.repeat; ++repeat) {
    progress(cat("sleeping consumer, run ", repeat + 1, " of ", options.repeat));
    rates.push_back(run.throughput(RingMethod::kOurs, true, count, 1));
    // The ring is built at the start of the queue's memory; its doorbell's word counts the wakes.
    wakes += reinterpret_cast<ReportRing*>(run.area.queue_memory())->data_doorbell().word.load();
  }
  row.reports_per_second = summarize(rates);
  row.wakes_per_report = static_cast<double>(wakes) / static_cast<double>(count * options.repeat);
  progress("latency: sleeping consumer");
  set_latency(row, run.latency(RingMethod::kOurs, true, std::max<uint64_t>(1, options.latency_samples / 4),
                               options.latency_interval_ns * 4));
  return row;
}

}  // namespace

const char* core_sharing_name(CoreSharing sharing) {
  switch (sharing) {
    case CoreSharing::kDifferentCores: return "different cores";
    case CoreSharing::kSmtSiblings: return "SMT siblings";
    case CoreSharing::kUnknown: break;
  }
  return "cores unknown";
}

CpuPair choose_ring_cpus(const std::vector<int>& allowed,
                         const std::function<std::pair<int, int>(int cpu)>& core_of) {
  if (allowed.size() < 2) return {};
  const int consumer = allowed[0];
  const std::pair<int, int> home = core_of(consumer);
  if (home.second < 0) return CpuPair{allowed[1], consumer, CoreSharing::kUnknown};
  int other_package = -1;
  for (size_t i = 1; i < allowed.size(); ++i) {
    const std::pair<int, int> core = core_of(allowed[i]);
    if (core.second < 0 || core == home) continue;
    if (core.first == home.first) return CpuPair{allowed[i], consumer, CoreSharing::kDifferentCores};
    if (other_package < 0) other_package = allowed[i];
  }
  if (other_package >= 0) return CpuPair{other_package, consumer, CoreSharing::kDifferentCores};
  return CpuPair{allowed[1], consumer, core_of(allowed[1]) == home ? CoreSharing::kSmtSiblings : CoreSharing::kUnknown};
}

RingBenchResult run_ring_bench(Os& os, const RingBenchOptions& options,
                               const std::function<void(const std::string&)>& progress) {
  RingBenchResult result;
  const CpuPair cpus = pick_cpus(os, options.cpus);
  result.producer_cpu = cpus.producer;
  result.consumer_cpu = cpus.consumer;
  result.core_sharing = cpus.sharing;
  result.membarrier_registered = baseline::registered_for_membarrier(os);
  SharedArea area(std::max({ReportRing::memsize(kRingBenchCapacity), ReportRingV1::memsize(kRingBenchCapacity),
                            sizeof(BoostQueue)}));
  pin(os, result.consumer_cpu);
  Run run{os, area, result.producer_cpu};
  for (uint32_t batch : options.batches) {
    std::vector<RingBenchRow> rows = measure_batch(run, options, batch, progress);
    result.rows.insert(result.rows.end(), rows.begin(), rows.end());
  }
  result.rows.push_back(measure_sleeping(run, options, progress));
  return result;
}

}  // namespace hugepin::bench
