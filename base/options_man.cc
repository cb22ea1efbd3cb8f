#include "base/options_man.h"

#include <sstream>

#include "base/error.h"
#include "base/options.h"

namespace hugepin {
namespace {

constexpr std::string_view kMarker = ".\\\" hugepin-options:";

// The options a configuration file cannot name as keys (daemon/config.cc refuses both).
bool listed(const OptionSpec& spec, unsigned scope, ManStyle style) {
  if ((spec.scope & scope) == 0) return false;
  return style == ManStyle::kEnvironment || (spec.id != Option::kConfig && spec.id != Option::kPool);
}

// What the value looks like: "\fIsize\fR", or the choices in bold.
std::string value_roff(const OptionSpec& spec) {
  if (spec.type != OptionType::kChoice) return cat("\\fI", type_name(spec.type), "\\fR");
  std::string out;
  std::string_view choices = spec.choices;
  while (!choices.empty()) {
    size_t bar = choices.find('|');
    if (!out.empty()) out += "|";
    out += cat("\\fB", roff_escape(choices.substr(0, bar)), "\\fR");
    choices = bar == std::string_view::npos ? std::string_view() : choices.substr(bar + 1);
  }
  return out;
}

std::string default_roff(const OptionSpec& spec, ManStyle style) {
  if (style == ManStyle::kConfigFile && spec.id == Option::kLog) {
    // hugepind's own default, as daemon/config.cc resolves it and hugepind --help says.
    return "Default: \\fBinfo\\fR (hugepind logs what it does unless told otherwise; the shim's default is warn).";
  }
  if (spec.default_value.empty()) return "Default: unset.";
  return cat("Default: \\fB", roff_escape(spec.default_value), "\\fR.");
}

void append_entry(const OptionSpec& spec, ManStyle style, std::ostringstream& out) {
  out << ".TP\n";
  if (style == ManStyle::kEnvironment) {
    out << "\\fB" << spec.variable << "\\fR=" << value_roff(spec) << "\n";
  } else {
    out << "\\fB" << config_key(spec) << "\\fR = " << value_roff(spec) << "\n";
  }
  out << roff_escape(spec.doc) << ".\n";
  if (spec.type == OptionType::kInt) out << "From " << spec.min << " to " << spec.max << ".\n";
  out << default_roff(spec, style) << "\n";
  if (style == ManStyle::kConfigFile) {
    out << "Also the variable \\fB" << spec.variable << "\\fR and the flag \\fB" << roff_escape(flag_name(spec))
        << "\\fR.\n";
  }
}

std::string fill_marker(std::string_view line, size_t line_number) {
  std::istringstream words{std::string(line.substr(kMarker.size()))};
  std::string style_word, scope_word, extra;
  words >> style_word >> scope_word >> extra;
  ManStyle style = ManStyle::kEnvironment;
  if (style_word == "config-file") {
    style = ManStyle::kConfigFile;
  } else if (style_word != "environment") {
    throw Error(cat("line ", line_number, ": unknown style '", style_word, "' (environment, config-file)"));
  }
  unsigned scope = 0;
  if (scope_word == "shim") {
    scope = kShimScope;
  } else if (scope_word == "daemon") {
    scope = kDaemonScope;
  } else {
    throw Error(cat("line ", line_number, ": unknown scope '", scope_word, "' (shim, daemon)"));
  }
  if (!extra.empty()) throw Error(cat("line ", line_number, ": unexpected '", extra, "' after the scope"));
  return options_roff(scope, style);
}

}  // namespace

std::string options_roff(unsigned scope, ManStyle style) {
  std::ostringstream out;
  for (const OptionSpec& spec : option_table()) {
    if (listed(spec, scope, style)) append_entry(spec, style, out);
  }
  return out.str();
}

std::vector<std::string> option_names(unsigned scope, ManStyle style) {
  std::vector<std::string> names;
  for (const OptionSpec& spec : option_table()) {
    if (!listed(spec, scope, style)) continue;
    names.push_back(style == ManStyle::kEnvironment ? std::string(spec.variable) : config_key(spec));
  }
  return names;
}

std::string roff_escape(std::string_view text) {
  std::string out;
  if (!text.empty() && (text.front() == '.' || text.front() == '\'')) out += "\\&";
  for (char c : text) {
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
  }
  return out;
}

std::string fill_option_markers(std::string_view page) {
  std::string out;
  size_t line_number = 0;
  while (!page.empty()) {
    size_t end = page.find('\n');
    std::string_view line = page.substr(0, end);
    page = end == std::string_view::npos ? std::string_view() : page.substr(end + 1);
    ++line_number;
    if (line.starts_with(kMarker)) {
      out += fill_marker(line, line_number);
    } else {
      out += line;
      out += '\n';
    }
  }
  return out;
}

}  // namespace hugepin
