// The CUDA copy engine and pinning on a real GPU: every backend, both directions and both at
// once, block sizes from 4 KiB to 4 MiB and odd ones, random data, poisoned destinations, every
// byte checked. Needs an NVIDIA GPU; skips (77) without one. Uses 2 MiB hugepages when it can
// borrow them (root), 4 KiB shared memory otherwise.
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "base/error.h"
#include "base/size.h"
#include "dma/copy_engine.h"
#include "dma/copy_units.h"
#include "dma/gpu_clock.h"
#include "dma/gpu_runtime.h"
#include "dma/pinning.h"
#include "hugemem/arena.h"
#include "tests/support/gate.h"
#include "tests/support/temp_dir.h"

namespace hugepin {
namespace {

constexpr uint64_t kRegionBytes = 128 * kMiB;
constexpr std::byte kPoison{0xA5};

void cuda_ok(cudaError_t error, const char* what) {
  if (error != cudaSuccess) FAIL(what << ": " << cudaGetErrorString(error));
}

// A pinned host region and a device buffer of the same size, with host mirrors to check.
struct Fixture {
  test::TempDir shm{"/dev/shm"};
  std::unique_ptr<test::BorrowedHugepages> pages;
  MappedRegion region;
  PinnedRegion pinned;
  void* device = nullptr;

  Fixture() {
    std::string why_not;
    pages = test::BorrowedHugepages::borrow(kRegionBytes / (2 * kMiB), 2 * kMiB, &why_not);
    ArenaOptions options;
    options.shm_dir = shm.path();
    options.page_size = pages ? 2 * kMiB : 4 * kKiB;
    if (pages) options.hugetlbfs_dir = pages->mount_dir();
    options.strict = true;
    create_arena(real_os(), "cuda-test", {{0, kRegionBytes, -1}}, options);
    region = open_region(real_os(), "cuda-test", 0, true, options);
    PinOptions pin;
    pin.alignment = region.page_size();
    pin.chunk_bytes = 32 * kMiB;  // several chunks, so spans must respect their edges
    pinned = pin_region(*cuda_runtime(), region.data(), region.size(), pin);
    cuda_ok(cudaMalloc(&device, kRegionBytes), "cudaMalloc");
    destroy_arena(real_os(), "cuda-test", options);  // the mapping keeps the pages
  }
  ~Fixture() {
    cudaFree(device);
    pinned = PinnedRegion();
  }

  std::byte* host() { return region.data(); }

  // Engines must know where the pinned chunks end: DMA fails on a span crossing two
  // registrations (seen on the H200 host: cudaErrorInvalidValue).
  CopyEngineOptions engine_options() const {
    CopyEngineOptions options;
    options.host_split_base = reinterpret_cast<uintptr_t>(region.data());
    options.host_split_bytes = pinned.chunk_bytes();
    return options;
  }

  // Two segments (K and V), each [blocks, block_bytes] contiguous on both sides.
  std::vector<SegmentView> views(uint64_t block_bytes) {
    const uint64_t blocks = kRegionBytes / 2 / block_bytes;
    std::vector<SegmentView> out;
    for (uint64_t s = 0; s < 2; ++s) {
      const uint64_t offset = s * (kRegionBytes / 2);
      out.push_back({reinterpret_cast<uintptr_t>(device) + offset, block_bytes, blocks, host() + offset, block_bytes,
                     blocks, block_bytes});
    }
    return out;
  }
};

Fixture* g_fixture = nullptr;

void fill_random(std::vector<std::byte>& bytes, uint64_t seed) {
  std::mt19937_64 random(seed);
  auto* words = reinterpret_cast<uint64_t*>(bytes.data());
  for (size_t i = 0; i < bytes.size() / 8; ++i) words[i] = random();
}

// Copies with `backend` and checks every byte of the destination side: moved blocks equal their
// source, every other block still holds the poison.
void check_copy(CopyEngine& engine, Direction direction, CopyBackend backend, std::span<const BlockPair> pairs,
                uint64_t seed) {
  Fixture& f = *g_fixture;
  std::vector<std::byte> source(kRegionBytes), poison(kRegionBytes, kPoison), result(kRegionBytes);
  fill_random(source, seed);
  const bool load = direction == Direction::kHostToDevice;
  if (load) {
    std::memcpy(f.host(), source.data(), kRegionBytes);
    cuda_ok(cudaMemcpy(f.device, poison.data(), kRegionBytes, cudaMemcpyHostToDevice), "poison device");
    cuda_ok(cudaDeviceSynchronize(), "poison device");  // pageable copies may return before landing
  } else {
    cuda_ok(cudaMemcpy(f.device, source.data(), kRegionBytes, cudaMemcpyHostToDevice), "fill device");
    cuda_ok(cudaDeviceSynchronize(), "fill device");
    std::memcpy(f.host(), poison.data(), kRegionBytes);
  }
  auto completion = engine.launch(direction, pairs, backend);
  completion->wait();
  CHECK(completion->done());
  if (load) {
    cuda_ok(cudaMemcpy(result.data(), f.device, kRegionBytes, cudaMemcpyDeviceToHost), "read device");
  } else {
    std::memcpy(result.data(), f.host(), kRegionBytes);
  }
  std::vector<std::byte> expected = poison;
  for (const SegmentView& view : engine.views()) {
    const uint64_t offset = reinterpret_cast<uintptr_t>(view.host_base) - reinterpret_cast<uintptr_t>(f.host());
    for (const BlockPair& pair : pairs) {
      std::memcpy(expected.data() + offset + pair.dst * view.host_block_stride,
                  source.data() + offset + pair.src * view.host_block_stride, view.block_bytes);
    }
  }
  const bool equal = result == expected;
  CHECK_MESSAGE(equal, "backend ", backend_name(backend), " ", direction_name(direction), " block ",
                engine.views()[0].block_bytes);
}

std::vector<BlockPair> random_pairs(uint64_t blocks, uint64_t count, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<uint64_t> destinations(blocks);
  for (uint64_t i = 0; i < blocks; ++i) destinations[i] = i;
  std::shuffle(destinations.begin(), destinations.end(), random);
  std::vector<BlockPair> pairs;
  for (uint64_t i = 0; i < std::min(count, blocks); ++i) pairs.push_back({random() % blocks, destinations[i]});
  // A run of consecutive blocks too, so merging is exercised.
  return pairs;
}

// What the completion calls of one test saw: the order they ran in, and whether the bytes of
// their copies were in the host region when they ran.
struct CallLog {
  std::mutex mutex;
  std::vector<int> order;
  std::vector<bool> landed;
  std::vector<int> errors;
};

struct CallContext {
  CallLog* log;
  int id;
  std::vector<std::pair<const std::byte*, const std::byte*>> spans;  // host bytes, expected bytes
  size_t bytes;
};

void note_call(void* context, int error) {
  auto* call = static_cast<CallContext*>(context);
  bool landed = true;
  for (const auto& [host, expected] : call->spans) landed &= std::memcmp(host, expected, call->bytes) == 0;
  std::lock_guard lock(call->log->mutex);
  call->log->order.push_back(call->id);
  call->log->landed.push_back(landed);
  call->log->errors.push_back(error);
}

}  // namespace

// Jobs that store consecutive runs of blocks from a device filled with random bytes into a
// poisoned host region, each with the context of a call that checks that its bytes landed.
struct StoreJobs {
  std::vector<std::byte> source = std::vector<std::byte>(kRegionBytes);
  uint64_t per_job = 0;
  CallLog log;
  std::vector<CallContext> calls;

  StoreJobs(Fixture& f, const CopyEngine& engine, uint64_t block, int jobs, uint64_t seed) : calls(jobs) {
    fill_random(source, seed);
    cuda_ok(cudaMemcpy(f.device, source.data(), kRegionBytes, cudaMemcpyHostToDevice), "fill device");
    cuda_ok(cudaDeviceSynchronize(), "fill device");
    std::memset(f.host(), static_cast<int>(kPoison), kRegionBytes);
    per_job = engine.views()[0].device_blocks / jobs;
    for (int job = 0; job < jobs; ++job) {
      calls[job] = {&log, job, {}, per_job * block};
      for (const SegmentView& view : engine.views()) {
        const uint64_t offset = reinterpret_cast<uintptr_t>(view.host_base) - reinterpret_cast<uintptr_t>(f.host());
        const uint64_t at = offset + job * per_job * block;
        calls[job].spans.push_back({f.host() + at, source.data() + at});
      }
    }
  }
  StoreJobs(const StoreJobs&) = delete;
  StoreJobs& operator=(const StoreJobs&) = delete;

  std::vector<BlockPair> pairs(int job) const {
    std::vector<BlockPair> pairs;
    for (uint64_t b = job * per_job; b < (job + 1) * per_job; ++b) pairs.push_back({b, b});
    return pairs;
  }
};

// `options` with each way completion calls can wait for their events, one subcase each.
CopyEngineOptions each_completion_wait(CopyEngineOptions options) {
  SUBCASE("waiting asleep on each event") { options.completion_poll_ns = 0; }
  SUBCASE("polling the events every 20 us") { options.completion_poll_ns = 20'000; }
  SUBCASE("asking back to back") { options.completion_spin = true; }
  return options;
}

TEST_CASE("completion calls run once each, after their copies have landed, in order per stream, none lost when the "
          "engine goes") {
  Fixture& f = *g_fixture;
  constexpr uint64_t kBlock = 64 * kKiB;
  constexpr int kJobs = 8;
  const CopyEngineOptions options = each_completion_wait(f.engine_options());
  // Odd jobs go on a stream of the caller's: its calls keep their own order, whichever of the two
  // streams finishes first (one thread serves both when polling or spinning, one each asleep).
  cudaStream_t caller_stream = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&caller_stream, cudaStreamNonBlocking), "creating a stream");
  auto engine = make_cuda_copy_engine(f.views(kBlock), options);
  StoreJobs jobs(f, *engine, kBlock, kJobs, 7);
  const CallLog& log = jobs.log;
  for (int job = 0; job < kJobs; ++job) {
    void* stream = job % 2 == 0 ? nullptr : caller_stream;
    engine->enqueue(Direction::kDeviceToHost, jobs.pairs(job), CopyBackend::kDmaBatch, stream);
    engine->when_done(Direction::kDeviceToHost, stream, &note_call, &jobs.calls[job]);
  }
  engine.reset();  // the calls not run yet run now, each after its copies
  cuda_ok(cudaStreamDestroy(caller_stream), "destroying a stream");
  REQUIRE(log.order.size() == kJobs);
  int last_seen[2] = {-1, -1};  // per stream, the job of the last call seen
  for (size_t i = 0; i < log.order.size(); ++i) {
    const int job = log.order[i];
    CAPTURE(job);
    CHECK(job > last_seen[job % 2]);
    last_seen[job % 2] = job;
    CHECK(log.landed[i]);
    CHECK(log.errors[i] == 0);
  }
  CHECK(last_seen[0] == kJobs - 2);
  CHECK(last_seen[1] == kJobs - 1);
}

TEST_CASE("every backend moves exactly the right bytes at every block size") {
  Fixture& f = *g_fixture;
  uint64_t seed = 1;
  for (uint64_t block : {4 * kKiB, 16 * kKiB, 64 * kKiB, 256 * kKiB + 16, 1 * kMiB, 4 * kMiB}) {
    CAPTURE(block);
    auto engine = make_cuda_copy_engine(f.views(block), f.engine_options());
    const uint64_t blocks = engine->views()[0].device_blocks;
    std::vector<BlockPair> pairs = random_pairs(blocks, std::max<uint64_t>(blocks / 3, 1), seed);
    for (Direction direction : {Direction::kHostToDevice, Direction::kDeviceToHost}) {
      for (CopyBackend backend : {CopyBackend::kDmaBatch, CopyBackend::kDmaPerBlock, CopyBackend::kSmLoadStore,
                                  CopyBackend::kSmBulk, CopyBackend::kAuto}) {
        check_copy(*engine, direction, backend, pairs, ++seed);
      }
    }
  }
}

TEST_CASE("runs of consecutive blocks and single pairs") {
  Fixture& f = *g_fixture;
  auto engine = make_cuda_copy_engine(f.views(16 * kKiB), f.engine_options());
  std::vector<BlockPair> run;
  for (uint64_t b = 0; b < 300; ++b) run.push_back({100 + b, 2000 + b});
  std::vector<BlockPair> one{{7, 3}};
  for (Direction direction : {Direction::kHostToDevice, Direction::kDeviceToHost}) {
    for (CopyBackend backend : {CopyBackend::kDmaBatch, CopyBackend::kSmLoadStore, CopyBackend::kSmBulk}) {
      check_copy(*engine, direction, backend, run, 99);
      check_copy(*engine, direction, backend, one, 98);
    }
  }
  auto empty = engine->launch(Direction::kHostToDevice, {});
  empty->wait();
  CHECK(empty->done());
}

TEST_CASE("SM kernels cut into several kernels per launch move the same bytes") {
  Fixture& f = *g_fixture;
  uint64_t seed = 500;
  // 300 pairs: carried in the kernels' parameters by default, uploaded at a limit of 0 (240).
  for (uint64_t carried_max : {CopyEngineOptions().sm_carried_pairs_max, uint64_t{0}}) {
    for (uint64_t slice : {uint64_t{1}, 64 * kKiB, 1 * kMiB}) {  // 1: one pair per kernel
      CAPTURE(carried_max);
      CAPTURE(slice);
      CopyEngineOptions options = f.engine_options();
      options.sm_slice_bytes = slice;
      options.sm_carried_pairs_max = carried_max;
      for (uint64_t block : {4 * kKiB, 64 * kKiB + 16}) {
        auto engine = make_cuda_copy_engine(f.views(block), options);
        std::vector<BlockPair> pairs = random_pairs(engine->views()[0].device_blocks, 300, seed);
        for (Direction direction : {Direction::kHostToDevice, Direction::kDeviceToHost}) {
          for (CopyBackend backend : {CopyBackend::kSmLoadStore, CopyBackend::kSmBulk}) {
            check_copy(*engine, direction, backend, pairs, ++seed);
          }
        }
      }
    }
  }
}

TEST_CASE("SM launches of more pairs than one metadata upload move the same bytes") {
  // The engine uploads a launch's pairs in batches of 4096, 8192, ... pairs, each followed by its
  // kernels: 16384 pairs take three batches, and with a slice each batch several kernels.
  Fixture& f = *g_fixture;
  uint64_t seed = 700;
  for (uint64_t slice : {uint64_t{0}, 1 * kMiB}) {
    CAPTURE(slice);
    CopyEngineOptions options = f.engine_options();
    options.sm_slice_bytes = slice;
    auto engine = make_cuda_copy_engine(f.views(4 * kKiB), options);
    const uint64_t blocks = engine->views()[0].device_blocks;
    REQUIRE(blocks >= 16384);
    std::vector<BlockPair> pairs = random_pairs(blocks, 16384, seed);
    for (Direction direction : {Direction::kHostToDevice, Direction::kDeviceToHost}) {
      for (CopyBackend backend : {CopyBackend::kSmLoadStore, CopyBackend::kSmBulk}) {
        check_copy(*engine, direction, backend, pairs, ++seed);
      }
    }
  }
}

TEST_CASE("SM launches around the carried limits (240 a kernel, sm_carried_pairs_max a launch) move the same bytes") {
  Fixture& f = *g_fixture;
  uint64_t seed = 900;
  const uint64_t carried = kInlinePairs;
  const uint64_t carried_max = CopyEngineOptions().sm_carried_pairs_max;
  struct Case {
    uint64_t carried_max;
    uint64_t slice;  // 64 KiB: two pairs of 16 KiB blocks (K and V) per kernel
    std::vector<uint64_t> counts;
  };
  const Case cases[] = {
      {carried_max, 0, {1, 63, 64, carried, carried + 1, 2 * carried + 1, carried_max, carried_max + 1}},
      {carried_max, 64 * kKiB, {1, 64, carried + 1, carried_max, carried_max + 1}},
      {300, 0, {300, 301}},  // a small limit: both sides of it
  };
  for (const Case& c : cases) {
    CAPTURE(c.carried_max);
    CAPTURE(c.slice);
    CopyEngineOptions options = f.engine_options();
    options.sm_slice_bytes = c.slice;
    options.sm_carried_pairs_max = c.carried_max;
    auto engine = make_cuda_copy_engine(f.views(16 * kKiB), options);
    for (uint64_t count : c.counts) {
      CAPTURE(count);
      std::vector<BlockPair> pairs = random_pairs(engine->views()[0].device_blocks, count, seed);
      REQUIRE(pairs.size() == count);
      for (Direction direction : {Direction::kHostToDevice, Direction::kDeviceToHost}) {
        for (CopyBackend backend : {CopyBackend::kSmLoadStore, CopyBackend::kSmBulk}) {
          check_copy(*engine, direction, backend, pairs, ++seed);
        }
      }
    }
  }
}

TEST_CASE("unaligned blocks: the SM kernels refuse them, auto moves them by DMA") {
  Fixture& f = *g_fixture;
  std::vector<SegmentView> views = f.views(4 * kKiB);
  for (SegmentView& view : views) view.block_bytes = 4 * kKiB - 8;  // not a multiple of 16
  auto engine = make_cuda_copy_engine(views, f.engine_options());
  std::vector<BlockPair> pairs = random_pairs(engine->views()[0].device_blocks, 500, 5);
  CHECK_THROWS_WITH_AS(engine->launch(Direction::kHostToDevice, pairs, CopyBackend::kSmLoadStore),
                       doctest::Contains("is not a multiple of 16 bytes"), Error);
  CHECK(engine->auto_backend(Direction::kHostToDevice) == CopyBackend::kDmaBatch);
  check_copy(*engine, Direction::kHostToDevice, CopyBackend::kAuto, pairs, 6);
  check_copy(*engine, Direction::kDeviceToHost, CopyBackend::kAuto, pairs, 7);
}

TEST_CASE("timing marks: a copy's GPU time and end fall inside what the host saw around it") {
  Fixture& f = *g_fixture;
  std::vector<SegmentView> all = f.views(64 * kKiB);
  auto engine = make_cuda_copy_engine({all[0]}, f.engine_options());
  std::vector<BlockPair> pairs;
  for (uint64_t b = 0; b < all[0].device_blocks; ++b) pairs.push_back({b, b});
  for (int round = 0; round < 20; ++round) {
    CAPTURE(round);
    // Longer than the clock's rounds apart: the spans after use newer origins (dma/gpu_clock.h).
    if (round % 10 == 9) std::this_thread::sleep_for(std::chrono::milliseconds(120));
    const int64_t before = real_os().monotonic_ns();
    const uint64_t start = engine->mark(Direction::kHostToDevice, nullptr);
    auto done = engine->launch(Direction::kHostToDevice, pairs, CopyBackend::kSmLoadStore);
    const uint64_t end = engine->mark(Direction::kHostToDevice, nullptr);
    done->wait();
    const CopyEngine::MarkSpan span = engine->span(start, end);
    const int64_t after = real_os().monotonic_ns();
    CHECK(span.elapsed_ns > 0);
    CHECK(span.elapsed_ns <= after - before);
    CAPTURE(span.end_window_ns);
    CAPTURE(after - before);
    CAPTURE(span.end_ns - before);
    // Within half the clock's window: microseconds against a copy of milliseconds.
    CHECK(span.end_ns + span.end_window_ns / 2 >= before);
    CHECK(span.end_ns - span.end_window_ns / 2 <= after);
    CHECK(span.end_window_ns > 0);  // a host reading before and after the event: never 0 wide
    CHECK(span.end_window_ns < after - before);
  }
}

TEST_CASE("a job's end mark tells when its copies landed: when_reached() and reached(), the mark still readable") {
  Fixture& f = *g_fixture;
  constexpr uint64_t kBlock = 64 * kKiB;
  constexpr int kJobs = 6;
  // Asleep, the engine records a point of its own after the mark; polling and spinning, the call
  // waits behind the mark itself.
  const CopyEngineOptions options = each_completion_wait(f.engine_options());
  auto engine = make_cuda_copy_engine(f.views(kBlock), options);
  StoreJobs jobs(f, *engine, kBlock, kJobs, 11);
  CallLog& log = jobs.log;
  std::vector<CallContext>& calls = jobs.calls;
  std::vector<std::pair<uint64_t, uint64_t>> marks;
  // Even jobs: a call behind the end mark; odd ones: a call behind a point of their own, so that
  // both kinds share the stream's queue in order.
  for (int job = 0; job < kJobs; ++job) {
    const uint64_t start = engine->mark(Direction::kDeviceToHost, nullptr);
    engine->enqueue(Direction::kDeviceToHost, jobs.pairs(job), CopyBackend::kDmaBatch, nullptr);
    const uint64_t end = engine->mark(Direction::kDeviceToHost, nullptr);
    marks.push_back({start, end});
    if (job % 2 == 0) {
      engine->when_reached(end, &note_call, &calls[job]);
    } else {
      engine->when_done(Direction::kDeviceToHost, nullptr, &note_call, &calls[job]);
    }
  }
  engine->synchronize();
  for (const auto& [start, end] : marks) CHECK(engine->reached(end));
  // Every call ran (the engine's threads may still be on their way to the last): wait for them.
  for (int i = 0; i < 2000; ++i) {
    {
      std::lock_guard lock(log.mutex);
      if (log.order.size() == kJobs) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (const auto& [start, end] : marks) CHECK(engine->span(start, end).elapsed_ns > 0);
  CHECK_THROWS_AS(engine->reached(marks[0].second), Error);  // span() forgot it
  CHECK_THROWS_AS(engine->when_reached(987654321, &note_call, &calls[0]), Error);
  engine.reset();
  REQUIRE(log.order.size() == kJobs);
  for (int i = 0; i < kJobs; ++i) {
    CAPTURE(i);
    CHECK(log.order[i] == i);
    CHECK(log.landed[i]);
    CHECK(log.errors[i] == 0);
  }
}

// Holds a stream until open() is called: a host function on the stream that waits for it (the
// stream's later work, copies and events, cannot start before the function returns). It gives
// up after 10 s, so that a bug that waits for the held stream fails the test instead of hanging it.
class StreamHold {
 public:
  explicit StreamHold(cudaStream_t stream) : stream_(stream) {
    cuda_ok(cudaLaunchHostFunc(stream, &StreamHold::wait_open, this), "holding a stream");
  }
  // Opens, then waits for the stream: the host function is done with this object before it goes.
  ~StreamHold() {
    open();
    (void)cudaStreamSynchronize(stream_);
  }
  StreamHold(const StreamHold&) = delete;
  StreamHold& operator=(const StreamHold&) = delete;
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    opened_.notify_all();
  }

 private:
  static void wait_open(void* self) {
    auto* hold = static_cast<StreamHold*>(self);
    std::unique_lock lock(hold->mutex_);
    hold->opened_.wait_for(lock, std::chrono::seconds(10), [hold] { return hold->open_; });
  }
  cudaStream_t stream_;
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;
};

// Places an event that the host held back until `opened` and saw done at `seen` (a stream held by
// a host function, released at a known moment): the clock must put it inside that span, give or
// take half its window.
// The clock's last rounds, relative to `now`, for a failure's message.
std::string describe_rounds(GpuClock& clock, int64_t now) {
  std::string text = cat("rate ", clock.rate(), ", origin window ", clock.origin_window_ns() / 1000,
                         " us; rounds (before, +ack, +after, +window's end us, taken) relative to the check:");
  for (const GpuClock::RoundRecord& r : clock.recent_rounds()) {
    text += cat(" [", (r.before_ns - now) / 1000, ", +", (r.acknowledged_ns - r.before_ns) / 1000, ", +",
                (r.after_ns - r.before_ns) / 1000, ", +", (r.latest_ns - r.before_ns) / 1000, r.taken ? ", taken]" : "]");
  }
  return text;
}

void check_placement(GpuClock& clock, cudaStream_t stream, cudaEvent_t event) {
  int64_t opened = 0;
  {
    StreamHold hold(stream);
    cuda_ok(cudaEventRecord(event, stream), "recording an event");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    opened = real_os().monotonic_ns();
    hold.open();
  }
  cuda_ok(cudaEventSynchronize(event), "waiting for an event");
  const int64_t seen = real_os().monotonic_ns();
  const GpuClock::Placed placed = clock.place(event);
  CAPTURE(placed.ns - opened);
  CAPTURE(seen - placed.ns);
  CAPTURE(placed.window_ns);
  const std::string rounds = describe_rounds(clock, opened);
  CAPTURE(rounds);
  CHECK(placed.window_ns > 0);  // a handshake takes time: never exact
  CHECK(placed.ns + placed.window_ns / 2 >= opened);
  CHECK(placed.ns - placed.window_ns / 2 <= seen);
}

TEST_CASE("the GPU clock places events where the host saw them happen, fresh, measuring its rate, and after idling") {
  cudaStream_t stream = nullptr;
  cudaEvent_t event = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "creating a stream");
  cuda_ok(cudaEventCreate(&event), "creating an event");
  GpuClock clock(0);
  // The first round runs on the clock's thread at once, without anyone waiting for it; the next
  // (for the rate) not before a rate's baseline, since timing is not in use yet.
  const int64_t made = real_os().monotonic_ns();
  while (clock.recent_rounds().empty() && real_os().monotonic_ns() - made < 900'000'000) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(clock.recent_rounds().size() == 1);
  {
    INFO("right after the first round");
    check_placement(clock, stream, event);
    CHECK(clock.rate() == 1.0);  // not measured yet
  }
  // In use until the rate is measured (a handshake at least the rate's baseline after the first,
  // narrow enough): rounds run on the clock's thread meanwhile. On a GPU this test has alone, that
  // is right after the baseline; 10 s allows for a busy one.
  const int64_t until = real_os().monotonic_ns() + 10'000'000'000;
  while (clock.drift_error() == ClockModel::kAssumedDrift && real_os().monotonic_ns() < until) {
    cuda_ok(cudaEventRecord(event, stream), "recording an event");
    cuda_ok(cudaEventSynchronize(event), "waiting for an event");
    (void)clock.place(event);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  {
    INFO("with the rate measured");
    REQUIRE(clock.drift_error() < ClockModel::kAssumedDrift);
    CHECK(clock.rate() != 1.0);
    CHECK(std::abs(clock.rate() - 1.0) < ClockModel::kAssumedDrift);
    check_placement(clock, stream, event);
  }
  {
    INFO("with copies filling the link both ways");
    Fixture& f = *g_fixture;
    constexpr uint64_t kHalf = kRegionBytes / 2;
    const uint64_t chunk = f.pinned.chunk_bytes();
    REQUIRE(kHalf % (2 * chunk) == 0);
    std::array<cudaStream_t, 2> copies{};
    for (cudaStream_t& s : copies) cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "creating a stream");
    auto* host = reinterpret_cast<char*>(f.region.data());
    auto* device = static_cast<char*>(f.device);
    for (int burst = 0; burst < 30; ++burst) {
      CAPTURE(burst);
      // About 10 ms each way at the link's rate, a pinned chunk a copy (DMA cannot cross two).
      for (int i = 0; i < 16; ++i) {
        const uint64_t offset = (i % 2) * chunk;
        cuda_ok(cudaMemcpyAsync(device + offset, host + offset, chunk, cudaMemcpyHostToDevice, copies[0]), "copying");
        cuda_ok(cudaMemcpyAsync(host + kHalf + offset, device + kHalf + offset, chunk, cudaMemcpyDeviceToHost,
                                copies[1]),
                "copying");
      }
      check_placement(clock, stream, event);
      for (cudaStream_t s : copies) cuda_ok(cudaStreamSynchronize(s), "waiting for copies");
    }
    for (cudaStream_t s : copies) cuda_ok(cudaStreamDestroy(s), "destroying a stream");
    MESSAGE(describe_rounds(clock, real_os().monotonic_ns()));  // the windows under load, for the record
  }
  // Unused for longer than kKeepFreshNs: rounds at the idle pace.
  std::this_thread::sleep_for(std::chrono::nanoseconds(GpuClock::kKeepFreshNs + 200'000'000));
  {
    INFO("at the idle pace");
    check_placement(clock, stream, event);
  }
  cuda_ok(cudaEventDestroy(event), "destroying an event");
  cuda_ok(cudaStreamDestroy(stream), "destroying a stream");
}

TEST_CASE("engines on one device share its clock, which goes with its last user") {
  std::shared_ptr<GpuClock> first = GpuClock::of_device(0);
  std::weak_ptr<GpuClock> held = first;
  CHECK(GpuClock::of_device(0) == first);
  first.reset();
  CHECK(held.expired());
  // A clock made anew after the last went places events as the first did.
  std::shared_ptr<GpuClock> again = GpuClock::of_device(0);
  cudaStream_t stream = nullptr;
  cudaEvent_t event = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "creating a stream");
  cuda_ok(cudaEventCreate(&event), "creating an event");
  check_placement(*again, stream, event);
  cuda_ok(cudaEventDestroy(event), "destroying an event");
  cuda_ok(cudaStreamDestroy(stream), "destroying a stream");
}

TEST_CASE("a call behind an end mark waits for the copies before it, and the engine's end runs it once") {
  Fixture& f = *g_fixture;
  constexpr uint64_t kBlock = 64 * kKiB;
  const CopyEngineOptions options = each_completion_wait(f.engine_options());
  cudaStream_t stream = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "creating a stream");
  auto engine = make_cuda_copy_engine(f.views(kBlock), options);
  StoreJobs jobs(f, *engine, kBlock, 1, 13);
  {
    StreamHold hold(stream);
    engine->mark(Direction::kDeviceToHost, stream);  // a start mark, never read: forgotten with the engine
    engine->enqueue(Direction::kDeviceToHost, jobs.pairs(0), CopyBackend::kDmaBatch, stream);
    const uint64_t end = engine->mark(Direction::kDeviceToHost, stream);
    engine->when_reached(end, &note_call, &jobs.calls[0]);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK_FALSE(engine->reached(end));
    {
      std::lock_guard lock(jobs.log.mutex);
      CHECK(jobs.log.order.empty());  // held: nothing before the mark has run
    }
    hold.open();
    engine.reset();  // the call runs by the time the engine is gone, once, after its copies
  }
  cuda_ok(cudaStreamSynchronize(stream), "waiting for the stream");
  cuda_ok(cudaStreamDestroy(stream), "destroying a stream");
  REQUIRE(jobs.log.order.size() == 1);
  CHECK(jobs.log.landed[0]);
  CHECK(jobs.log.errors[0] == 0);
}

TEST_CASE("loads and stores at once, on their own streams") {
  Fixture& f = *g_fixture;
  // Loads use the first segment, stores the second: disjoint bytes, concurrent.
  std::vector<SegmentView> all = f.views(64 * kKiB);
  auto loads = make_cuda_copy_engine({all[0]}, f.engine_options());
  auto stores = make_cuda_copy_engine({all[1]}, f.engine_options());
  std::vector<std::byte> source(kRegionBytes);
  fill_random(source, 42);
  std::memcpy(f.host(), source.data(), kRegionBytes);
  cuda_ok(cudaMemcpy(f.device, source.data(), kRegionBytes, cudaMemcpyHostToDevice), "fill device");
  cuda_ok(cudaDeviceSynchronize(), "fill device");
  const uint64_t blocks = all[0].device_blocks;
  std::vector<BlockPair> pairs;
  for (uint64_t b = 0; b < blocks; ++b) pairs.push_back({b, blocks - 1 - b});  // reverse every block
  auto load = loads->launch(Direction::kHostToDevice, pairs, CopyBackend::kSmLoadStore);
  auto store = stores->launch(Direction::kDeviceToHost, pairs, CopyBackend::kDmaBatch);
  load->wait();
  store->wait();
  std::vector<std::byte> device(kRegionBytes);
  cuda_ok(cudaMemcpy(device.data(), f.device, kRegionBytes, cudaMemcpyDeviceToHost), "read device");
  const uint64_t half = kRegionBytes / 2;
  bool loads_right = true;
  bool stores_right = true;
  for (uint64_t b = 0; b < blocks; ++b) {
    const uint64_t at = b * 64 * kKiB;
    const uint64_t from = (blocks - 1 - b) * 64 * kKiB;
    loads_right &= std::memcmp(device.data() + at, source.data() + from, 64 * kKiB) == 0;
    stores_right &= std::memcmp(f.host() + half + at, source.data() + half + from, 64 * kKiB) == 0;
  }
  CHECK(loads_right);
  CHECK(stores_right);
}

namespace {

// Stores of `launches` launches of 16 KiB blocks, each launch its own run of blocks (block b to
// block b), from random device bytes into a poisoned host region: returns the engine's views and
// what the host must hold after.
struct QueuedStores {
  std::unique_ptr<CopyEngine> engine;
  std::vector<std::vector<BlockPair>> launches;
  std::vector<std::byte> source = std::vector<std::byte>(kRegionBytes);

  QueuedStores(const CopyEngineOptions& options, size_t count) {
    Fixture& f = *g_fixture;
    engine = make_cuda_copy_engine(f.views(16 * kKiB), options);
    fill_random(source, 1234 + count);
    cuda_ok(cudaMemcpy(f.device, source.data(), kRegionBytes, cudaMemcpyHostToDevice), "fill device");
    cuda_ok(cudaDeviceSynchronize(), "fill device");
    std::memset(f.host(), static_cast<int>(kPoison), kRegionBytes);
    const uint64_t per_launch = engine->views()[0].device_blocks / count;
    for (size_t i = 0; i < count; ++i) {
      launches.emplace_back();
      for (uint64_t b = i * per_launch; b < (i + 1) * per_launch; ++b) launches.back().push_back({b, b});
    }
  }

  // Every launched block holds the device's bytes (a launch whose pair list was overwritten
  // before its kernel ran would leave some poisoned and copy others twice).
  bool landed() const {
    Fixture& f = *g_fixture;
    for (const SegmentView& view : engine->views()) {
      const uint64_t offset = reinterpret_cast<uintptr_t>(view.host_base) - reinterpret_cast<uintptr_t>(f.host());
      for (const auto& pairs : launches) {
        for (const BlockPair& pair : pairs) {
          const uint64_t at = offset + pair.dst * view.host_block_stride;
          if (std::memcmp(f.host() + at, source.data() + at, view.block_bytes) != 0) return false;
        }
      }
    }
    return true;
  }
};

void hold_stream(void* open) {
  while (!static_cast<std::atomic<bool>*>(open)->load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

}  // namespace

TEST_CASE("SM launches queue behind one another without waiting for the GPU, each keeping its own pairs") {
  // A host function holds the stream, so that nothing queued behind it runs: 12 launches of 341
  // pairs must all be enqueued while it holds, their lists uploaded (the first version of the
  // engine waited for the fifth) or carried in their kernels' parameters (two kernels each).
  for (uint64_t carried_max : {uint64_t{0}, CopyEngineOptions().sm_carried_pairs_max}) {  // 0 counts as 240
    CAPTURE(carried_max);
    CopyEngineOptions options = g_fixture->engine_options();
    options.sm_carried_pairs_max = carried_max;
    QueuedStores stores(options, 12);
    REQUIRE(stores.launches[0].size() > kInlinePairs);
    cudaStream_t stream = nullptr;
    cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "creating a stream");
    std::atomic<bool> open{false};
    cuda_ok(cudaLaunchHostFunc(stream, &hold_stream, &open), "holding the stream");
    std::mutex mutex;
    std::condition_variable changed;
    bool enqueued = false;
    std::string failure;
    std::thread launcher([&] {
      try {
        for (const auto& pairs : stores.launches) {
          stores.engine->enqueue(Direction::kDeviceToHost, pairs, CopyBackend::kSmLoadStore, stream);
        }
      } catch (const std::exception& error) {
        failure = error.what();
      }
      std::lock_guard lock(mutex);
      enqueued = true;
      changed.notify_all();
    });
    bool enqueued_while_held = false;
    {
      std::unique_lock lock(mutex);
      // Not a timing check: the old engine never gets there while the stream is held.
      enqueued_while_held = changed.wait_for(lock, std::chrono::seconds(60), [&] { return enqueued; });
    }
    open = true;  // before anything here may throw: the held stream must run out
    launcher.join();
    CHECK_MESSAGE(failure.empty(), failure);
    cuda_ok(cudaStreamSynchronize(stream), "waiting for the launches");
    cuda_ok(cudaStreamDestroy(stream), "destroying a stream");
    CHECK(enqueued_while_held);
    CHECK(stores.landed());
  }
}

TEST_CASE("SM launches past the queue limit wait for the oldest, and reuse its metadata only after it ran") {
  CopyEngineOptions options = g_fixture->engine_options();
  options.sm_launches_queued = 3;
  options.sm_carried_pairs_max = 0;  // counts as 240: 341 pairs are uploaded
  QueuedStores stores(options, 16);
  REQUIRE(stores.launches[0].size() > kInlinePairs);
  std::vector<std::unique_ptr<CopyCompletion>> completions;
  for (const auto& pairs : stores.launches) {
    completions.push_back(stores.engine->launch(Direction::kDeviceToHost, pairs, CopyBackend::kSmLoadStore));
  }
  for (auto& completion : completions) completion->wait();
  CHECK(stores.landed());
}

TEST_CASE("pinning the same memory twice fails cleanly and leaves no error behind") {
  Fixture& f = *g_fixture;
  PinOptions pin;
  pin.alignment = f.region.page_size();
  CHECK_THROWS_WITH_AS(pin_region(*cuda_runtime(), f.region.data(), f.region.size(), pin),
                       doctest::Contains("cudaErrorHostMemoryAlreadyRegistered"), Error);
  // Nothing sticky: the runtime still works and the first registration still serves copies.
  CHECK(cudaGetLastError() == cudaSuccess);
  auto engine = make_cuda_copy_engine(f.views(4 * kKiB), f.engine_options());
  check_copy(*engine, Direction::kDeviceToHost, CopyBackend::kDmaBatch, random_pairs(1000, 100, 3), 4);
}

}  // namespace hugepin

int main(int argc, char** argv) {
  const std::string needs = "an NVIDIA GPU with a working driver";
  if (hugepin::test::pretend_missing("gpu")) return hugepin::test::run_or_skip(argc, argv, hugepin::test::pretended("gpu", needs));
  if (!hugepin::cuda_available()) return hugepin::test::run_or_skip(argc, argv, needs);
  hugepin::Fixture fixture;
  hugepin::g_fixture = &fixture;
  return hugepin::test::run_or_skip(argc, argv, "");
}
