// hugepin arena save|load NAME DIR: arena snapshots (disk/snapshot.h), with a progress line on a
// terminal and the throughput at the end.
#include <unistd.h>

#include <chrono>
#include <iostream>

#include "base/size.h"
#include "base/table.h"
#include "cli/command.h"
#include "disk/snapshot.h"

namespace hugepin::cli {
namespace {

struct SnapshotArgs {
  std::string name;
  std::string dir;
  std::string chunk;  // empty: 2M for save, the snapshot's for load
  std::string io = "auto";
  bool json = false;
};

// A progress line on stderr, redrawn at most ten times a second, shown only on a terminal and
// only once a run has lasted a second (short runs print nothing but the result).
class ProgressLine {
 public:
  explicit ProgressLine(std::string verb) : verb_(std::move(verb)), enabled_(isatty(STDERR_FILENO) != 0) {}
  ~ProgressLine() {
    if (shown_) std::cerr << "\r\033[K" << std::flush;
  }
  void update(uint64_t done, uint64_t total) {
    if (!enabled_) return;
    const auto now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    if (elapsed < 1.0 || now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    shown_ = true;
    std::cerr << "\r\033[K  " << verb_ << " " << format_bytes(done) << " of " << format_bytes(total) << " ("
              << fixed(100.0 * static_cast<double>(done) / static_cast<double>(total), 0) << "%), "
              << fixed(static_cast<double>(done) / elapsed / 1e9, 2) << " GB/s" << std::flush;
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::string verb_;
  bool enabled_;
  bool shown_ = false;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_{};
};

SnapshotOptions snapshot_options(const SnapshotArgs& args, uint64_t default_chunk) {
  SnapshotOptions options;
  options.chunk_bytes = args.chunk.empty() ? default_chunk : size_value(args.chunk);
  if (!args.chunk.empty() && options.chunk_bytes == 0) throw UsageError("--chunk: the chunk size must not be 0");
  options.io.io = *parse_spill_io(args.io);
  return options;
}

double gb_per_second(const SnapshotReport& report) {
  return report.seconds > 0 ? static_cast<double>(report.bytes) / report.seconds / 1e9 : 0;
}

void print_report(const SnapshotReport& report, std::string_view verb, std::string_view preposition, bool json) {
  if (json) {
    print_json({{"arena", report.arena},
                {"dir", report.dir},
                {"generation", report.generation},
                {"regions", report.regions},
                {"bytes", report.bytes},
                {"chunks", report.chunks},
                {"seconds", report.seconds},
                {"gb_per_second", gb_per_second(report)},
                {"backend", report.backend},
                {"fallback", report.fallback},
                {"removed", report.removed}});
    return;
  }
  std::cout << verb << " arena '" << report.arena << "' " << preposition << " " << report.dir << " (generation "
            << report.generation << "): " << report.regions << " regions, " << format_bytes(report.bytes) << " in "
            << report.chunks << " chunks, " << fixed(report.seconds, 2) << " s, " << fixed(gb_per_second(report), 2)
            << " GB/s (" << report.backend << ")\n";
  if (!report.removed.empty()) {
    std::string names;
    for (const std::string& name : report.removed) names += (names.empty() ? "" : ", ") + name;
    std::cout << "removed what an interrupted save left: " << names << "\n";
  }
}

void add_options(CLI::App* command, SnapshotArgs& args, std::string_view chunk_help) {
  command->add_option("NAME", args.name, "Arena name")->required();
  command->add_option("DIR", args.dir, "Snapshot directory")->required();
  command->add_option("--chunk", args.chunk, std::string(chunk_help))->check(size_validator());
  command->add_option("--io", args.io, "I/O path: auto (io_uring + O_DIRECT, else a thread pool), uring, threads")
      ->check(CLI::IsMember({"auto", "uring", "threads"}));
  command->add_flag("--json", args.json, "Print JSON (documented in docs/commands.md)");
}

}  // namespace

void add_snapshot_commands(CLI::App& app, Context& context) {
  CLI::App* arena = app.get_subcommand("arena");

  auto save_args = std::make_shared<SnapshotArgs>();
  CLI::App* save = arena->add_subcommand("save", "Save every region of an arena to DIR, with a checksummed manifest");
  add_options(save, *save_args, "Checksum and I/O unit (default 2M)");
  save->callback([&context, save_args] {
    context.action = [&context, save_args] {
      SnapshotOptions options = snapshot_options(*save_args, 2 * kMiB);
      ProgressLine progress("saved");
      options.progress = [&](uint64_t done, uint64_t total) { progress.update(done, total); };
      SnapshotReport report = save_snapshot(context.os(), save_args->name, save_args->dir, options);
      print_report(report, "saved", "to", save_args->json);
      return 0;
    };
  });

  auto load_args = std::make_shared<SnapshotArgs>();
  CLI::App* load = arena->add_subcommand(
      "load", "Load the snapshot in DIR into an arena of the same shape, checking every chunk's checksum");
  add_options(load, *load_args, "Refuse a snapshot saved with another chunk size (default: the snapshot's)");
  load->callback([&context, load_args] {
    context.action = [&context, load_args] {
      SnapshotOptions options = snapshot_options(*load_args, 0);
      ProgressLine progress("loaded");
      options.progress = [&](uint64_t done, uint64_t total) { progress.update(done, total); };
      SnapshotReport report = load_snapshot(context.os(), load_args->name, load_args->dir, options);
      print_report(report, "loaded", "from", load_args->json);
      return 0;
    };
  });
}

}  // namespace hugepin::cli
