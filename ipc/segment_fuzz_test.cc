// The segment reader against corrupt and truncated segments: thousands of random mutations and
// truncations of a real segment image (fixed seed), each read as the inspector reads. Every read
// must succeed or throw hugepin::Error; a crash, a hang or another exception fails. Beyond that:
// every truncation and every corruption of a checked field is refused (alone, with its own reason),
// the refusals reach many different checks, and what parses agrees with itself and, where the
// mutations left the control block alone, with the original header. Run it under AddressSanitizer
// too (-DHUGEPIN_ASAN=ON): an out-of-bounds read there fails loudly.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
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

// Where mutations wrote: [first, second) byte ranges of the image.
struct Edits {
  std::vector<std::pair<size_t, size_t>> spans;
  bool touch(size_t begin, size_t end) const {
    for (const auto& [first, last] : spans) {
      if (first < end && begin < last) return true;
    }
    return false;
  }
};

// Mutates `image` in place: a few bytes or fields, mostly in the header and records (the first
// pages), sometimes anywhere. Records where it wrote in `edits`.
void mutate(std::mt19937_64& random, std::byte* image, size_t size, Edits& edits) {
  if (size == 0) return;
  const size_t hot = std::min<size_t>(size, 3 * 4096);
  const int count = 1 + static_cast<int>(random() % 6);
  for (int i = 0; i < count; ++i) {
    const size_t span = random() % 4 == 0 ? size : hot;
    if (random() % 2 == 0) {
      const size_t at = random() % span;
      image[at] = static_cast<std::byte>(random());
      edits.spans.emplace_back(at, at + 1);
    } else if (span >= 8) {
      const size_t at = (random() % (span / 8)) * 8;
      const uint64_t value = interesting(random, size);
      std::memcpy(image + at, &value, sizeof value);
      edits.spans.emplace_back(at, at + sizeof value);
    }
  }
}

// Where the original image keeps what parse_segment checks.
struct Landmarks {
  size_t block = 0;    // the control block's offset
  size_t records = 0;  // the region records' offset
  SegmentHeader header;
};

Landmarks landmarks_of(const std::vector<std::byte>& original) {
  Image image(original.size());
  std::memcpy(image.data(), original.data(), original.size());
  ParsedSegment view = parse_segment(image.data(), image.size());
  return {static_cast<size_t>(reinterpret_cast<const std::byte*>(view.block) - image.data()),
          static_cast<size_t>(reinterpret_cast<const std::byte*>(view.regions) - image.data()), view.header};
}

// What a segment cut to `size` bytes, and not otherwise changed, is refused with. Cut inside the
// control block, the block is not found (a cut before it ends looks like no segment at all);
// shorter than any block, or past it, the cut is named.
const char* truncation_refusal(size_t size, const Landmarks& at) {
  return size >= sizeof(ControlBlock) && size < at.block + sizeof(ControlBlock) ? "no control block" : "(truncated?)";
}

// A corruption of one field that parse_segment checks: the image must be refused, and when it is
// the only change, with `reason` in the message.
struct Corruption {
  const char* reason;
  std::function<void(std::byte* image, const Landmarks& at)> apply;
};

ControlBlock& block_in(std::byte* image, const Landmarks& at) { return *reinterpret_cast<ControlBlock*>(image + at.block); }
RegionRecord& record_in(std::byte* image, const Landmarks& at, uint32_t rank) {
  return reinterpret_cast<RegionRecord*>(image + at.records)[rank];
}

const std::vector<Corruption>& corruptions() {
  static const std::vector<Corruption> all{
      {"no control block", [](std::byte* i, const Landmarks& at) { block_in(i, at).magic.store(0); }},
      {"layout version", [](std::byte* i, const Landmarks& at) { block_in(i, at).layout_version = kControlLayoutVersion + 1; }},
      {"control block is", [](std::byte* i, const Landmarks& at) { block_in(i, at).block_bytes += kCacheLinePair; }},
      {"its header says", [](std::byte* i, const Landmarks& at) { block_in(i, at).segment_bytes -= kCacheLinePair; }},
      {"the arena name is not terminated",
       [](std::byte* i, const Landmarks& at) { std::memset(block_in(i, at).arena, 'x', kArenaNameBytes); }},
      {"is not valid", [](std::byte* i, const Landmarks& at) { block_in(i, at).arena[0] = '.'; }},
      {"does not give its", [](std::byte* i, const Landmarks& at) { block_in(i, at).tp = 0; }},
      {"does not give its", [](std::byte* i, const Landmarks& at) { block_in(i, at).rank_count += 1; }},
      {"is not a power of two", [](std::byte* i, const Landmarks& at) { block_in(i, at).ring_capacity = 3; }},
      {"region records are", [](std::byte* i, const Landmarks& at) { block_in(i, at).region_record_bytes += 1; }},
      {"the doorbell at offset", [](std::byte* i, const Landmarks& at) { block_in(i, at).doorbell_offset += 8; }},
      {"the region records at offset",
       [](std::byte* i, const Landmarks& at) { block_in(i, at).regions_offset = block_in(i, at).segment_bytes; }},
      {"the scheduler counters at offset", [](std::byte* i, const Landmarks& at) { block_in(i, at).counters_offset += 64; }},
      {"the plan (", [](std::byte* i, const Landmarks& at) { block_in(i, at).plan_bytes = kMaxPlanJsonBytes + 1; }},
      {"region record 0 names rank", [](std::byte* i, const Landmarks& at) { record_in(i, at, 0).rank = 1; }},
      {"has page size 3", [](std::byte* i, const Landmarks& at) { record_in(i, at, 1).page_size = 3; }},
      {"unterminated backing path",
       [](std::byte* i, const Landmarks& at) { std::memset(record_in(i, at, 2).backing_path, 'x', kBackingPathBytes); }},
      {"has a ring of", [](std::byte* i, const Landmarks& at) { record_in(i, at, 3).ring_bytes += kCacheLinePair; }},
      {"ring at offset", [](std::byte* i, const Landmarks& at) { record_in(i, at, 1).ring_offset += 8; }},
  };
  return all;
}

// A refusal's reason: its message with numbers and quoted names taken out, so that refusals by
// the same check count together.
std::string reason_of(const std::string& message) {
  std::string reason;
  bool quoted = false;
  for (char c : message) {
    if (c == '\'') {
      quoted = !quoted;
      if (quoted) reason += "'?'";
    } else if (quoted) {
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      if (reason.empty() || reason.back() != '#') reason += '#';
    } else {
      reason += c;
    }
  }
  return reason;
}

struct Outcome {
  int parsed = 0;
  int parsed_with_block_intact = 0;  // of those, how many the mutations left the control block alone
  std::map<std::string, int> refused;  // by reason_of
  std::vector<std::string> refusals;   // every message, in order

  int refused_count() const { return static_cast<int>(refusals.size()); }
  void refuse(const std::string& message) {
    ++refused[reason_of(message)];
    refusals.push_back(message);
  }
  std::string table() const {
    std::string text;
    for (const auto& [reason, count] : refused) text += cat("\n  ", count, " x ", reason);
    return text;
  }
};

// What any parse must give: the snapshot agrees with the parsed header, and every ring with it.
void check_parsed(const ParsedSegment& view, const ArenaSnapshot& snapshot) {
  CHECK(snapshot.header.arena == view.header.arena);
  CHECK(snapshot.ranks.size() == view.header.rank_count);
  CHECK(view.rings.size() == view.header.rank_count);
  CHECK(uint64_t{view.header.tp} * view.header.pp == view.header.rank_count);
  for (const RankSnapshot& rank : snapshot.ranks) {
    CHECK(rank.ring_capacity == view.header.ring_capacity);
    CHECK(rank.ring_depth <= rank.ring_capacity);
    CHECK(rank.tp_rank < view.header.tp);
    CHECK(rank.pp_rank < view.header.pp);
  }
}

// A header parsed from an image whose control block no mutation touched: the original's.
void check_same_header(const SegmentHeader& parsed, const SegmentHeader& original) {
  CHECK(parsed.arena == original.arena);
  CHECK(parsed.segment_bytes == original.segment_bytes);
  CHECK(parsed.creator_pid == original.creator_pid);
  CHECK(parsed.created_realtime_ns == original.created_realtime_ns);
  CHECK(parsed.tp == original.tp);
  CHECK(parsed.pp == original.pp);
  CHECK(parsed.rank_count == original.rank_count);
  CHECK(parsed.ring_capacity == original.ring_capacity);
  CHECK(parsed.blocks_per_chunk == original.blocks_per_chunk);
  CHECK(parsed.chunk_count == original.chunk_count);
}

// Reads an image the way the inspector does (parse, snapshot, metrics) and checks what it reads.
// Returns the refusal's message, or "" when the image parsed.
std::string read_like_the_inspector(const std::byte* image, size_t size, const Landmarks& at, const Edits& edits,
                                    Outcome& outcome) {
  try {
    ParsedSegment view = parse_segment(image, size);
    ArenaSnapshot snapshot = snapshot_segment(real_os(), view);
    std::string text = metrics_text({InspectEntry{snapshot.name, snapshot, ""}}, real_os().monotonic_ns());
    CHECK(text.find(snapshot.header.arena) != std::string::npos);
    check_parsed(view, snapshot);
    ++outcome.parsed;
    if (!edits.touch(at.block, at.block + sizeof(ControlBlock))) {
      ++outcome.parsed_with_block_intact;
      check_same_header(view.header, at.header);
    }
    return "";
  } catch (const Error& error) {
    outcome.refuse(error.what());
    return error.what();
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
  const Landmarks at = landmarks_of(original);
  REQUIRE(at.header.rank_count == 4);  // the corruptions name ranks 0 to 3

  std::mt19937_64 random(0x5eed);
  Outcome outcome;
  Image image(original.size());
  int truncations = 0;
  int corrupted = 0;
  int corrupted_refused = 0;
  const int rounds = 20000;
  for (int round = 0; round < rounds; ++round) {
    std::memcpy(image.data(), original.data(), original.size());
    size_t size = original.size();
    Edits edits;
    if (round % 5 == 0) size = random() % original.size();  // truncated: shorter than the header says
    if (round % 5 != 0 || random() % 2 == 0) mutate(random, image.data(), size, edits);
    const bool truncated_only = size < original.size() && edits.spans.empty();
    // Every tenth whole image also gets one corruption of a checked field, after the mutations
    // (which then cannot undo it).
    const Corruption* corruption = nullptr;
    if (round % 10 == 1) {
      corruption = &corruptions()[random() % corruptions().size()];
      corruption->apply(image.data(), at);
    }
    CAPTURE(round);
    const std::string refused = read_like_the_inspector(image.data(), size, at, edits, outcome);
    if (truncated_only) {
      ++truncations;
      CHECK_MESSAGE(refused.find(truncation_refusal(size, at)) != std::string::npos, refused);
    }
    if (corruption != nullptr) {
      ++corrupted;
      corrupted_refused += refused.empty() ? 0 : 1;
      CHECK_MESSAGE(!refused.empty(), corruption->reason);
    }
  }
  MESSAGE(rounds, " images: ", outcome.parsed, " parsed (", outcome.parsed_with_block_intact,
          " with the control block intact), ", outcome.refused_count(), " refused:", outcome.table());
  CHECK(truncations > 100);
  CHECK(corrupted == rounds / 10);
  CHECK(corrupted_refused == corrupted);
  CHECK(outcome.parsed_with_block_intact > 100);  // mutations of records, rings and counters still read
  CHECK(outcome.refused.size() >= 12);            // the refusals come from many different checks

  // The unmutated image still reads: the mutations above worked on copies.
  Outcome clean;
  std::memcpy(image.data(), original.data(), original.size());
  CHECK(read_like_the_inspector(image.data(), original.size(), at, {}, clean).empty());
}

TEST_CASE("each corruption of a checked field, alone, is refused with its own reason") {
  test::TestArena arena("fuzzfield", test::small_layout(2, 2), ControlOptions{32});
  const std::vector<std::byte> original = sample_image(arena);
  const Landmarks at = landmarks_of(original);
  REQUIRE(at.header.rank_count == 4);
  Image image(original.size());
  Outcome outcome;
  for (const Corruption& corruption : corruptions()) {
    CAPTURE(corruption.reason);
    std::memcpy(image.data(), original.data(), original.size());
    corruption.apply(image.data(), at);
    const std::string refused = read_like_the_inspector(image.data(), original.size(), at, {{{0, original.size()}}}, outcome);
    CHECK_MESSAGE(refused.find(corruption.reason) != std::string::npos, refused);
  }
  CHECK(outcome.parsed == 0);
}

TEST_CASE("corrupt and truncated segment files, opened read-only as the inspector opens them") {
  test::TestArena arena("fuzzfile", test::small_layout(2, 1), ControlOptions{16});
  const std::vector<std::byte> original = sample_image(arena);
  const Landmarks at = landmarks_of(original);
  test::TempDir dir("/dev/shm");
  const std::string path = dir.path() + "/segment";
  std::mt19937_64 random(0xf11e);
  Outcome outcome;
  int truncations = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<std::byte> image = original;
    image.resize(round % 3 == 0 ? random() % original.size() : original.size());
    Edits edits;
    if (round % 3 != 0 || random() % 2 == 0) mutate(random, image.data(), image.size(), edits);
    const bool truncated_only = image.size() < original.size() && edits.spans.empty();
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(image.data()), static_cast<std::streamsize>(image.size()));
    }
    CAPTURE(round);
    try {
      ControlSegment segment = ControlSegment::open_file(real_os(), path, SegmentAccess::kReadOnly);
      ArenaSnapshot snapshot = snapshot_segment(real_os(), segment.view());
      CHECK_FALSE_MESSAGE(truncated_only, "a truncated file opened");
      check_parsed(segment.view(), snapshot);
      ++outcome.parsed;
      if (!edits.touch(at.block, at.block + sizeof(ControlBlock))) check_same_header(segment.header(), at.header);
    } catch (const Error& error) {
      outcome.refuse(error.what());
      if (truncated_only) {
        ++truncations;
        CHECK_MESSAGE(std::string(error.what()).find(truncation_refusal(image.size(), at)) != std::string::npos,
                      error.what());
      }
    }
  }
  MESSAGE("300 files: ", outcome.parsed, " parsed, ", outcome.refused_count(), " refused:", outcome.table());
  CHECK(truncations > 20);
  CHECK(outcome.parsed > 0);
  CHECK(outcome.refused.size() >= 4);
}

}  // namespace hugepin
