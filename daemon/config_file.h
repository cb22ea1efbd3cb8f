// hugepind's configuration file, /etc/hugepin/hugepind.conf: INI lines.
//
//   # comment            a line starting with '#' or ';' (after white space); so is a blank line
//   [daemon]             a section: [daemon] (where lines before any section go) or [pool]
//   key = value          white space around key and value is dropped; an empty value is unset
//
// Comments are whole lines: "retention = 24h # a day" is the value "24h # a day", which the
// option then refuses by name. What the keys mean is daemon/config.h's business.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/os.h"

namespace hugepin::daemon {

struct ConfigLine {
  std::string section;  // "daemon" or "pool"
  std::string key;
  std::string value;
  int line = 0;         // 1-based
};

struct ConfigFile {
  std::string path;
  bool found = false;  // false: the file does not exist (read_config_file with missing_ok)
  std::vector<ConfigLine> lines;

  // "path:line", how errors name a line.
  std::string where(const ConfigLine& line) const;
};

// Parses `text` as the file `path`. Throws Error "path:N: ..." for the first bad line: neither a
// comment, a section nor key = value; an unknown section; an empty key; a key given twice in one
// section.
ConfigFile parse_config_text(std::string_view text, const std::string& path);

// The longest configuration file read: a real one is a few kilobytes.
inline constexpr uint64_t kMaxConfigBytes = 1024 * 1024;

// Reads and parses `path`, opened as base/trusted_file.h says (a link, a FIFO, a device, another
// user's or a world-writable file is refused; more than kMaxConfigBytes is not read). A missing
// file is an empty ConfigFile (found = false) when `missing_ok`, else an Error; any other read
// failure is an Error naming the file.
ConfigFile read_config_file(Os& os, const std::string& path, bool missing_ok);

}  // namespace hugepin::daemon
