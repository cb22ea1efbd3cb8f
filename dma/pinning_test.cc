// Chunked, parallel pinning against a fake runtime: chunk layout, progress, and a failure at any
// chunk leaving nothing registered.
#include "dma/pinning.h"

#include <doctest/doctest.h>

#include "base/error.h"
#include "base/size.h"
#include "tests/support/fake_gpu_runtime.h"

namespace hugepin {
namespace {

// An address range nobody touches: the fake runtime never dereferences it.
void* fake_base() { return reinterpret_cast<void*>(uintptr_t{1} << 46); }

}  // namespace

TEST_CASE("a 512 GiB region is pinned as 64 GiB chunks, none overlapping") {
  test::FakeGpuRuntime runtime;
  PinOptions options;
  options.threads = 4;
  options.alignment = 2 * kMiB;
  std::vector<uint64_t> progress;
  PinnedRegion region = pin_region(runtime, fake_base(), 512 * kGiB, options,
                                   [&](uint64_t done, uint64_t total) {
                                     CHECK(total == 512 * kGiB);
                                     progress.push_back(done);
                                   });
  CHECK(region.chunks() == 8);
  CHECK(region.chunk_bytes() == 64 * kGiB);
  CHECK(runtime.live_registrations() == 8);
  CHECK(region.device_address() == reinterpret_cast<uintptr_t>(fake_base()));
  REQUIRE(progress.size() == 8);
  CHECK(std::is_sorted(progress.begin(), progress.end()));
  CHECK(progress.back() == 512 * kGiB);
  uint64_t covered = 0;
  for (auto [base, size] : runtime.live()) {
    CHECK(size <= kMaxPinChunkBytes);
    covered += size;
  }
  CHECK(covered == 512 * kGiB);
  region.unpin();
  CHECK(runtime.live_registrations() == 0);
}

TEST_CASE("chunk size: one per thread, aligned, never above the limit") {
  PinOptions options;
  options.threads = 4;
  options.alignment = 2 * kMiB;
  CHECK(pin_chunk_size(16 * kGiB, options) == 4 * kGiB);
  CHECK(pin_chunk_size(3 * kMiB, options) == 2 * kMiB);
  options.chunk_bytes = 1 * kGiB;  // a small chunk setting shows the chunking on a small host
  CHECK(pin_chunk_size(16 * kGiB, options) == kGiB);
  options.chunk_bytes = 1024 * kGiB;  // lowered to the 64 GiB ceiling
  options.threads = 1;
  CHECK(pin_chunk_size(1024 * kGiB, options) == 64 * kGiB);
  options.alignment = kGiB;
  options.threads = 3;
  CHECK(pin_chunk_size(10 * kGiB, options) == 4 * kGiB);
}

TEST_CASE("a failing chunk undoes every chunk registered, and the error names it") {
  for (int failing = 0; failing < 8; ++failing) {
    CAPTURE(failing);
    test::FakeGpuRuntime runtime;
    runtime.fail_register(failing, test::FakeGpuRuntime::kErrorMemoryAllocation);
    PinOptions options;
    options.threads = failing % 2 == 0 ? 1 : 4;
    options.alignment = 2 * kMiB;
    try {
      pin_region(runtime, fake_base(), 512 * kGiB, options);
      FAIL("pin_region succeeded despite a failing chunk");
    } catch (const Error& error) {
      std::string message = error.what();
      CHECK(message.find("cannot pin chunk") == 0);
      CHECK(message.find("of 8 (64.00 GiB at offset") != std::string::npos);
      CHECK(message.find("cudaErrorMemoryAllocation") != std::string::npos);
      CHECK(message.find("nothing stays pinned") != std::string::npos);
      CHECK(error.errno_value() == test::FakeGpuRuntime::kErrorMemoryAllocation);
    }
    CHECK(runtime.live_registrations() == 0);
  }
}

TEST_CASE("a region already registered elsewhere is refused and left as it was") {
  test::FakeGpuRuntime runtime;
  PinOptions options;
  options.alignment = 2 * kMiB;
  PinnedRegion first = pin_region(runtime, fake_base(), 4 * kGiB, options);
  CHECK_THROWS_WITH_AS(pin_region(runtime, fake_base(), 4 * kGiB, options),
                       doctest::Contains("cudaErrorHostMemoryAlreadyRegistered"), Error);
  CHECK(runtime.live_registrations() == first.chunks());
}

TEST_CASE("no device mapping: the region is unpinned and the error says so") {
  test::FakeGpuRuntime runtime;
  runtime.fail_device_pointer(1);
  PinOptions options;
  CHECK_THROWS_WITH_AS(pin_region(runtime, fake_base(), 64 * kMiB, options),
                       doctest::Contains("cannot map it for GPU 0"), Error);
  CHECK(runtime.live_registrations() == 0);
}

TEST_CASE("misaligned or empty ranges are refused before any registration") {
  test::FakeGpuRuntime runtime;
  PinOptions options;
  options.alignment = 2 * kMiB;
  CHECK_THROWS_WITH_AS(pin_region(runtime, fake_base(), 3 * kMiB, options), doctest::Contains("not aligned to 2M"), Error);
  CHECK_THROWS_WITH_AS(pin_region(runtime, fake_base(), 0, options), "cannot pin an empty region", Error);
  CHECK(runtime.live_registrations() == 0);
}

TEST_CASE("a moved region unpins once") {
  test::FakeGpuRuntime runtime;
  PinOptions options;
  options.alignment = 2 * kMiB;
  {
    PinnedRegion a = pin_region(runtime, fake_base(), 8 * kGiB, options);
    PinnedRegion b = std::move(a);
    CHECK(a.chunks() == 0);
    CHECK(b.chunks() == 4);
  }
  CHECK(runtime.live_registrations() == 0);
}

}  // namespace hugepin

namespace hugepin {

TEST_CASE("a progress callback that throws stops the pinning, undoes it and its error comes out") {
  test::FakeGpuRuntime runtime;
  PinOptions options;
  options.threads = 4;
  options.alignment = 2 * kMiB;
  options.chunk_bytes = 1 * kGiB;
  int calls = 0;
  CHECK_THROWS_WITH_AS(pin_region(runtime, fake_base(), 16 * kGiB, options,
                                  [&](uint64_t, uint64_t) {
                                    if (++calls == 2) throw Error("the caller gave up");
                                  }),
                       "the caller gave up", Error);
  CHECK(runtime.live_registrations() == 0);
}

}  // namespace hugepin
