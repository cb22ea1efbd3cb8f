#include "daemon/config_file.h"

#include <cerrno>
#include <set>
#include <utility>

#include "base/error.h"
#include "base/trusted_file.h"

namespace hugepin::daemon {
namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '\r')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

}  // namespace

std::string ConfigFile::where(const ConfigLine& line) const { return cat(path, ":", line.line); }

ConfigFile parse_config_text(std::string_view text, const std::string& path) {
  ConfigFile file;
  file.path = path;
  file.found = true;
  std::string section = "daemon";
  std::set<std::pair<std::string, std::string>> seen;
  int number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view raw = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++number;
    std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    auto fail = [&](std::string_view why) -> void {
      throw Error(cat(path, ":", number, ": ", why, " (line: '", line.substr(0, 80), "')"));
    };
    if (line.front() == '[') {
      if (line.back() != ']') fail("a section header ends with ']'");
      std::string name(trim(line.substr(1, line.size() - 2)));
      if (name != "daemon" && name != "pool") fail(cat("unknown section [", name, "]: use [daemon] or [pool]"));
      section = std::move(name);
      continue;
    }
    const size_t equals = line.find('=');
    if (equals == std::string_view::npos) fail("expected 'key = value', a [section] or a # comment");
    std::string key(trim(line.substr(0, equals)));
    if (key.empty()) fail("the key before '=' is empty");
    if (!seen.emplace(section, key).second) fail(cat("'", key, "' is given twice in [", section, "]"));
    file.lines.push_back({section, std::move(key), std::string(trim(line.substr(equals + 1))), number});
  }
  return file;
}

ConfigFile read_config_file(Os& os, const std::string& path, bool missing_ok) {
  // Whoever names the file (a flag, HUGEPIN_CONFIG), it is opened as base/trusted_file.h says:
  // a link, a FIFO or /dev/zero is refused at once, a huge file before it is read.
  std::string text;
  try {
    text = read_trusted_file(os, user_named(path), {FileType::kRegular, FileOwners::kTrusted, "configuration file"},
                             kMaxConfigBytes);
  } catch (const Error& error) {
    if (error.errno_value() != ENOENT || !missing_ok) throw;
    ConfigFile file;
    file.path = path;
    return file;
  }
  return parse_config_text(text, path);
}

}  // namespace hugepin::daemon
