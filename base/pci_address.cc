#include "base/pci_address.h"

#include <algorithm>
#include <cctype>

#include "base/error.h"

namespace hugepin {

std::string normalize_pci_address(std::string_view address) {
  auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  std::string text(address.begin(), address.end());
  text.erase(text.begin(), std::find_if_not(text.begin(), text.end(), is_space));
  text.erase(std::find_if_not(text.rbegin(), text.rend(), is_space).base(), text.end());
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (std::count(text.begin(), text.end(), ':') == 1) text = "0000:" + text;
  // domain:bus:device.function, hex digits: 4:2:2.1
  auto is_hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  bool ok = text.size() == 12 && text[4] == ':' && text[7] == ':' && text[10] == '.';
  for (size_t i = 0; ok && i < text.size(); ++i) {
    if (i != 4 && i != 7 && i != 10) ok = is_hex(text[i]);
  }
  if (!ok) {
    throw Error(cat("invalid PCI address '", address, "': expected DDDD:BB:DD.F, e.g. 0000:17:00.0"));
  }
  return text;
}

}  // namespace hugepin
