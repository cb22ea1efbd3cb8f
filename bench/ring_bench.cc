#include "bench/ring_bench.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <boost/lockfree/spsc_queue.hpp>
#include <cerrno>
#include <new>
#include <thread>

#include "base/error.h"
#include "ipc/doorbell.h"
#include "ipc/report_ring.h"

namespace hugepin::bench {
namespace {

using BoostQueue = boost::lockfree::spsc_queue<Report, boost::lockfree::capacity<kRingBenchCapacity>>;

// What the two processes share besides the queue: a start line.
struct alignas(kCacheLinePair) StartLine {
  std::atomic<uint32_t> producer_ready{0};
  alignas(kCacheLinePair) std::atomic<uint32_t> go{0};

  void reset() {
    producer_ready.store(0, std::memory_order_relaxed);
    go.store(0, std::memory_order_relaxed);
  }
};

// A queue under test, behind one interface: push and pop batches, spinning, no waiting.
struct Ours {
  Os* os;
  ReportRing* ring;
  bool sleeping_consumer = false;
  uint32_t push(const Report* reports, uint32_t n) { return ring->push_batch(*os, reports, n); }
  uint32_t pop(Report* out, uint32_t n) {
    return sleeping_consumer ? ring->pop_wait(*os, out, n, -1, /*spins=*/0) : ring->pop_batch(*os, out, n);
  }
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
  std::byte* queue_memory() { return memory_ + sizeof(StartLine); }

 private:
  size_t bytes_;
  std::byte* memory_;
  StartLine* start_;
};

void pin(Os& os, int cpu) {
  if (cpu >= 0) os.set_thread_cpus({cpu});
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

// Pops `count` reports in batches of `batch`, checking that sequences run 1..count.
template <typename Queue>
void consume_all(Queue& queue, uint64_t count, uint32_t batch) {
  std::vector<Report> out(batch);
  for (uint64_t expected = 1; expected <= count;) {
    uint32_t n = queue.pop(out.data(), batch);
    if (n == 0) cpu_relax();
    for (uint32_t i = 0; i < n; ++i, ++expected) {
      if (out[i].sequence != expected) {
        throw Error(cat("ring benchmark: report ", out[i].sequence, " arrived where ", expected, " was due"));
      }
    }
  }
}

template <typename Queue>
double throughput_run(Os& os, SharedArea& area, Queue queue, uint64_t count, uint32_t batch, int producer_cpu) {
  area.start().reset();
  pid_t pid = start_producer(os, area.start(), producer_cpu, queue,
                             [count, batch](Queue& q) { produce_all(q, count, batch); });
  const int64_t begin = monotonic_ns();
  area.start().go.store(1, std::memory_order_release);
  consume_all(queue, count, batch);
  const int64_t end = monotonic_ns();
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
  auto produce = [samples, interval_ns](Queue& q) {
    int64_t next = monotonic_ns();
    for (uint64_t i = 1; i <= samples; ++i) {
      while (monotonic_ns() < next) cpu_relax();
      Report report{ReportKind::kHeartbeat, 0, 0, i, 0, static_cast<uint64_t>(monotonic_ns())};
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
    const int64_t now = monotonic_ns();
    ++received;
    if (report.sequence != received) throw Error(cat("ring benchmark: latency report ", report.sequence, " out of order"));
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

// Two CPUs this process may run on: (producer, consumer), or (-1, -1) when it has one.
std::pair<int, int> choose_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return {-1, -1};
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE && cpus.size() < 2; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  if (cpus.size() < 2) return {-1, -1};
  return {cpus[1], cpus[0]};
}

// A pause before each measurement: caches and the scheduler settle, and a real-time policy's
// budget (chrt; 950 ms per second by default) is not spent across runs.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(200)); }

// A fresh queue of each kind in the area, for each run.
Ours make_ours(Os& os, SharedArea& area, bool sleeping) {
  return Ours{&os, ReportRing::init(area.queue_memory(), kRingBenchCapacity), sleeping};
}

Boost make_boost(SharedArea& area) { return Boost{new (area.queue_memory()) BoostQueue}; }

}  // namespace

RingBenchResult run_ring_bench(Os& os, const RingBenchOptions& options,
                               const std::function<void(const std::string&)>& progress) {
  RingBenchResult result;
  std::tie(result.producer_cpu, result.consumer_cpu) = choose_cpus();
  const int producer_cpu = result.producer_cpu;
  SharedArea area(std::max(ReportRing::memsize(kRingBenchCapacity), sizeof(BoostQueue)));
  pin(os, result.consumer_cpu);

  for (uint32_t batch : options.batches) {
    RingBenchRow ours{"hugepin ReportRing", true, batch};
    RingBenchRow boost{"Boost.Lockfree spsc_queue", false, batch};
    std::vector<double> ours_rates;
    std::vector<double> boost_rates;
    for (unsigned run = 0; run < options.repeat; ++run) {  // alternating: a drift hits both
      progress(cat("batch ", batch, ", run ", run + 1, " of ", options.repeat, ": ours"));
      settle();
      ours_rates.push_back(throughput_run(os, area, make_ours(os, area, false), options.count, batch, producer_cpu));
      progress(cat("batch ", batch, ", run ", run + 1, " of ", options.repeat, ": Boost"));
      settle();
      boost_rates.push_back(throughput_run(os, area, make_boost(area), options.count, batch, producer_cpu));
    }
    ours.reports_per_second = summarize(ours_rates);
    boost.reports_per_second = summarize(boost_rates);
    if (batch == 1) {
      progress("latency: ours");
      settle();
      Latency a = latency_run(os, area, make_ours(os, area, false), options.latency_samples, options.latency_interval_ns,
                              producer_cpu);
      progress("latency: Boost");
      settle();
      Latency b = latency_run(os, area, make_boost(area), options.latency_samples, options.latency_interval_ns, producer_cpu);
      std::tie(ours.latency_p50_ns, ours.latency_p99_ns, ours.latency_max_ns) = std::tuple(a.p50, a.p99, a.max);
      std::tie(boost.latency_p50_ns, boost.latency_p99_ns, boost.latency_max_ns) = std::tuple(b.p50, b.p99, b.max);
    }
    result.rows.push_back(ours);
    result.rows.push_back(boost);
  }

  // The consumer that sleeps on the doorbell when the ring is empty: the cost of not spinning.
  RingBenchRow sleeping{"hugepin ReportRing, consumer sleeps", true, 1};
  const uint64_t sleeping_count = std::max<uint64_t>(1, options.count / 4);  // a system call per wake: slower
  std::vector<double> rates;
  for (unsigned run = 0; run < options.repeat; ++run) {
    progress(cat("sleeping consumer, run ", run + 1, " of ", options.repeat));
    settle();
    rates.push_back(throughput_run(os, area, make_ours(os, area, true), sleeping_count, 1, producer_cpu));
  }
  sleeping.reports_per_second = summarize(rates);
  progress("latency: sleeping consumer");
  settle();
  Latency latency = latency_run(os, area, make_ours(os, area, true), options.latency_samples / 4,
                                options.latency_interval_ns * 4, producer_cpu);
  std::tie(sleeping.latency_p50_ns, sleeping.latency_p99_ns, sleeping.latency_max_ns) =
      std::tuple(latency.p50, latency.p99, latency.max);
  result.rows.push_back(sleeping);
  return result;
}

}  // namespace hugepin::bench
