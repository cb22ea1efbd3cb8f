// The segment reader against corrupt and truncated segments: thousands of random mutations and
// truncations of a real segment image (fixed seed), each read as the inspector reads. Every read
// must succeed or throw hugepin::Error; a crash, a hang or another exception fails. Run it under
// AddressSanitizer too (-DHUGEPIN_ASAN=ON): an out-of-bounds read there fails loudly.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <vector>

#include "base/error.h"
#include "ipc/arena_control.h"
#include "ipc/inspect.h"
#include "ipc/metrics.h"
#include "ipc/rank_attachment.h"
#include "ipc/test_arena.h"

namespace hugepin {
namespace {

// A 128-byte aligned copy of a segment image (parse_segment requires a mapping's alignment).
class Image {
 public:
  explicit Image(size_t size)
      : size_(size), data_(static_cast<std::byte*>(std::aligned_alloc(kCacheLinePair, round(size)))) {}
  ~Image() { std::free(data_); }
  Image(const Image&) = delete;
  Image& operator=(const Image&) = delete;
  std::byte* data() { return data_; }
  size_t size() const { return size_; }

 private:
  static size_t round(size_t size) { return std::max<size_t>(kCacheLinePair, (size + kCacheLinePair - 1) / kCacheLinePair * kCacheLinePair); }
  size_t size_;
  std::byte* data_;
};

std::vector<std::byte> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> image(bytes.size());
  std::memcpy(image.data(), bytes.data(), bytes.size());
  return image;
}

// Values that tend to break bounds checks, written over an aligned 8-byte field.
uint64_t interesting(std::mt19937_64& random, uint64_t size) {
  const uint64_t values[] = {0, 1, 127, 128, 4096, size - 1, size, size + 128, size / 2, ~uint64_t{0},
                             uint64_t{1} << 63, uint64_t{1} << 32, 0xffffffff, static_cast<uint64_t>(-128)};
  return values[random() % (sizeof values / sizeof values[0])] + (random() % 4 == 0 ? random() % 3 - 1 : 0);
}

// Mutates `image` in place: a few bytes or fields, mostly in the header and records (the first
// pages), sometimes anywhere.
void mutate(std::mt19937_64& random, std::byte* image, size_t size) {
  const size_t hot = std::min<size_t>(size, 3 * 4096);
  const int edits = 1 + static_cast<int>(random() % 6);
  for (int i = 0; i < edits; ++i) {
    const size_t span = random() % 4 == 0 ? size : hot;
    if (random() % 2 == 0) {
      image[random() % span] = static_cast<std::byte>(random());
    } else if (span >= 8) {
      const size_t at = (random() % (span / 8)) * 8;
      const uint64_t value = interesting(random, size);
      std::memcpy(image + at, &value, sizeof value);
    }
  }
}

struct Outcome {
  int parsed = 0;
  int refused = 0;
};

// Reads an image the way the inspector does: parse, snapshot, metrics.
void read_like_the_inspector(const std::byte* image, size_t size, Outcome& outcome) {
  try {
    ParsedSegment view = parse_segment(image, size);
    ArenaSnapshot snapshot = snapshot_segment(real_os(), view);
    std::string text = metrics_text({InspectEntry{snapshot.name, snapshot, ""}}, real_os().monotonic_ns());
    CHECK_FALSE(text.empty());
    ++outcome.parsed;
  } catch (const Error&) {
    ++outcome.refused;
  }
}

// A live-looking segment: attached workers, reports in the rings, scheduler figures, a plan.
std::vector<std::byte> sample_image(test::TestArena& arena) {
  ArenaControl scheduler = ArenaControl::adopt(real_os(), arena.name());
  const SegmentHeader& header = scheduler.header();
  RankAttachment worker = test::attach_rank(arena, header.tp - 1, header.pp - 1);
  for (uint64_t job = 0; job + 4 < header.ring_capacity; ++job) worker.post(ReportKind::kCopyComplete, job);
  Report out[8];
  scheduler.consume(worker.rank(), out);
  scheduler.publish(PublishedFigures{3, 1, 2, 0, 9, 0, 30, 1});
  std::vector<std::byte> image = read_file(control_segment_path(arena.name()));
  worker.detach();
  return image;
}

}  // namespace

TEST_CASE("random mutations and truncations of a segment: a result or an Error, never a crash") {
  ArenaLayout layout = test::small_layout(2, 2);
  layout.plan_json = R"({"plan":"fuzz"})";
  test::TestArena arena("fuzz", layout, ControlOptions{32});
  const std::vector<std::byte> original = sample_image(arena);
  REQUIRE(original.size() > 4096);

  std::mt19937_64 random(0x5eed);
  Outcome outcome;
  Image image(original.size());
  const int rounds = 20000;
  for (int round = 0; round < rounds; ++round) {
    std::memcpy(image.data(), original.data(), original.size());
    size_t size = original.size();
    if (round % 5 == 0) size = random() % (original.size() + 1);  // truncated
    if (round % 5 != 0 || random() % 2 == 0) mutate(random, image.data(), size);
    read_like_the_inspector(image.data(), size, outcome);
  }
  MESSAGE(rounds, " images: ", outcome.parsed, " parsed, ", outcome.refused, " refused with an Error");
  CHECK(outcome.parsed + outcome.refused == rounds);
  CHECK(outcome.parsed > 0);   // mutations of ring slots and counters still read
  CHECK(outcome.refused > 0);  // mutations of the header and records are caught

  // The unmutated image still reads: the mutations above worked on copies.
  Outcome clean;
  std::memcpy(image.data(), original.data(), original.size());
  read_like_the_inspector(image.data(), original.size(), clean);
  CHECK(clean.parsed == 1);
}

TEST_CASE("corrupt and truncated segment files, opened read-only as the inspector opens them") {
  test::TestArena arena("fuzzfile", test::small_layout(2, 1), ControlOptions{16});
  const std::vector<std::byte> original = sample_image(arena);
  test::TempDir dir("/dev/shm");
  const std::string path = dir.path() + "/segment";
  std::mt19937_64 random(0xf11e);
  Outcome outcome;
  for (int round = 0; round < 300; ++round) {
    std::vector<std::byte> image = original;
    image.resize(round % 3 == 0 ? random() % (original.size() + 1) : original.size());
    if (round % 3 != 0 || random() % 2 == 0) mutate(random, image.data(), image.size());
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(image.data()), static_cast<std::streamsize>(image.size()));
    }
    try {
      ControlSegment segment = ControlSegment::open_file(real_os(), path, SegmentAccess::kReadOnly);
      snapshot_segment(real_os(), segment.view());
      ++outcome.parsed;
    } catch (const Error&) {
      ++outcome.refused;
    }
  }
  MESSAGE("300 files: ", outcome.parsed, " parsed, ", outcome.refused, " refused with an Error");
  CHECK(outcome.parsed + outcome.refused == 300);
  CHECK(outcome.refused > 0);
}

}  // namespace hugepin
