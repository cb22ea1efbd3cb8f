// Spill and restore through the thread pool on a file opened with O_DIRECT, forced by option or by
// HUGEPIN_SPILL_IO, and refusals naming the value. In disk_direct_test: skips (77) where this
// machine's disk has no O_DIRECT.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "base/error.h"
#include "base/size.h"
#include "disk/spill.h"
#include "disk/test_spill.h"
#include "tests/support/error_text.h"

namespace hugepin {

using namespace test;  // the fixtures of the disk tests

TEST_CASE("the thread pool, forced by option or by HUGEPIN_SPILL_IO, round-trips too") {
  SpillFixture fixture;
  {
    SpillFile file = SpillFile::open(real_os(), fixture.path, fixture.memory(), options_for(SpillIo::kThreads));
    CHECK_FALSE(file.backend().uring);
    CHECK(file.backend().direct);
    CHECK(contains(file.backend().description, "pread/pwrite, 3 threads"));
    round_trip(file, fixture.memory(), 2);
  }
  ::setenv("HUGEPIN_SPILL_IO", "threads", 1);
  SpillFile forced = SpillFile::open(real_os(), fixture.path, fixture.memory(), options_for(SpillIo::kAuto));
  ::unsetenv("HUGEPIN_SPILL_IO");
  CHECK_FALSE(forced.backend().uring);
  CHECK(forced.backend().fallback.empty());  // asked for, not a fallback
  round_trip(forced, fixture.memory(), 3);
  CHECK(effective_spill_io(SpillIo::kAuto) == SpillIo::kAuto);
}

TEST_CASE("bad chunks, sizes and files are refused naming the value") {
  SpillFixture fixture;
  SpillFile file = SpillFile::open(real_os(), fixture.path, fixture.memory(), options_for(SpillIo::kAuto));
  CHECK_THROWS_WITH_AS(file.spill({1, 41}), doctest::Contains("chunk 41 is out of range"), Error);
  CHECK_THROWS_WITH_AS(file.restore({2, 5, 2}), doctest::Contains("chunk 2 is given twice"), Error);

  SpillOptions odd = options_for(SpillIo::kAuto);
  odd.chunk_bytes = 3000;
  CHECK_THROWS_WITH_AS(SpillFile::open(real_os(), fixture.path, fixture.memory(), odd),
                       doctest::Contains("chunk size 3000 is not a multiple of"), Error);

  SpillOptions existing = options_for(SpillIo::kAuto);
  existing.open = SpillOpen::kExisting;
  SpillFixture smaller(8 * kChunk);
  const std::string wrong_size =
      "holds " + std::to_string(fixture.region.size()) + " bytes; the region has " + std::to_string(8 * kChunk);
  CHECK_THROWS_WITH_AS(SpillFile::open(real_os(), fixture.path, smaller.memory(), existing),
                       doctest::Contains(wrong_size.c_str()), Error);
  SpillFile reader = SpillFile::open(real_os(), fixture.path, fixture.memory(), existing);
  CHECK_THROWS_WITH_AS(reader.spill({0}), doctest::Contains("opened for restore only"), Error);
  CHECK_THROWS_WITH_AS(SpillFile::open(real_os(), fixture.disk.path() + "/absent", fixture.memory(), existing),
                       doctest::Contains("ENOENT"), Error);
}

}  // namespace hugepin
