// Writes a man page from its template, filling the marker lines with the HUGEPIN_* options table
// (base/options_man.h). Run at build time by man/CMakeLists.txt; not installed.
//
//   fill_man_page TEMPLATE OUTPUT     the page, written whole (OUTPUT.tmp, then renamed)
//   fill_man_page --names STYLE SCOPE  the names the page lists, one a line (the docs test)
//
// Exit status 0, 1 on a failure (one line naming the file), 2 on bad usage.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

#include "base/error.h"
#include "base/options.h"
#include "base/options_man.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw hugepin::Error(hugepin::cat("cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) throw hugepin::Error(hugepin::cat("cannot write ", temporary));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    throw hugepin::Error(hugepin::cat("cannot rename ", temporary, " to ", path));
  }
}

int print_names(std::string_view style, std::string_view scope) {
  if ((style != "environment" && style != "config-file") || (scope != "shim" && scope != "daemon")) {
    std::cerr << "fill_man_page: --names takes environment|config-file and shim|daemon\n";
    return 2;
  }
  auto man_style = style == "environment" ? hugepin::ManStyle::kEnvironment : hugepin::ManStyle::kConfigFile;
  for (const std::string& name : hugepin::option_names(scope == "shim" ? hugepin::kShimScope : hugepin::kDaemonScope,
                                                       man_style)) {
    std::cout << name << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string_view(argv[1]) == "--names") return print_names(argv[2], argv[3]);
  if (argc != 3) {
    std::cerr << "usage: fill_man_page TEMPLATE OUTPUT | fill_man_page --names STYLE SCOPE\n";
    return 2;
  }
  try {
    std::string page = read_file(argv[1]);
    try {
      page = hugepin::fill_option_markers(page);
    } catch (const hugepin::Error& error) {
      throw hugepin::Error(hugepin::cat(argv[1], ": ", error.what()));
    }
    write_file(argv[2], page);
  } catch (const hugepin::Error& error) {
    std::cerr << "fill_man_page: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
