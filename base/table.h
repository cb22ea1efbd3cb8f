// Plain-text tables for terminals: a header row, columns padded to their widest cell, numbers
// right-aligned and text left-aligned.
#pragma once

#include <string>
#include <vector>

namespace hugepin {

class Table {
 public:
  enum class Align { kLeft, kRight };

  // One column per header; numeric columns are right-aligned.
  explicit Table(std::vector<std::string> headers, std::vector<Align> aligns = {});

  // REQUIRES: cells.size() == number of headers; throws std::logic_error otherwise.
  void add_row(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }

  // The table, one line per row, each ending in '\n'; two spaces between columns.
  std::string render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<Align> aligns_;
  std::vector<std::vector<std::string>> rows_;
};

// "12.35": `value` with `decimals` digits after the point.
std::string fixed(double value, int decimals);

}  // namespace hugepin
