#include "base/table.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace hugepin {

Table::Table(std::vector<std::string> headers, std::vector<Align> aligns)
    : headers_(std::move(headers)), aligns_(std::move(aligns)) {
  aligns_.resize(headers_.size(), Align::kRight);
}

void Table::add_row(std::vector<std::string> cells) {
  if (cells.size() != headers_.size()) throw std::logic_error("table row has the wrong number of cells");
  rows_.push_back(std::move(cells));
}

std::string Table::render() const {
  std::vector<size_t> widths(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) {
    widths[c] = headers_[c].size();
    for (const auto& row : rows_) widths[c] = std::max(widths[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < cells.size(); ++c) {
      std::string pad(widths[c] - cells[c].size(), ' ');
      bool last = c + 1 == cells.size();
      if (aligns_[c] == Align::kRight) {
        out += pad + cells[c];
      } else {
        out += cells[c] + (last ? "" : pad);
      }
      if (!last) out += "  ";
    }
    return out + "\n";
  };
  std::string out = line(headers_);
  for (const auto& row : rows_) out += line(row);
  return out;
}

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

}  // namespace hugepin
