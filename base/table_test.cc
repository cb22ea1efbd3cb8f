#include "base/table.h"

#include <doctest/doctest.h>

namespace hugepin {

TEST_CASE("Table pads columns, right-aligns numbers and left-aligns text") {
  Table table({"NAME", "PAGES"}, {Table::Align::kLeft, Table::Align::kRight});
  table.add_row({"a", "1"});
  table.add_row({"longer", "12345"});
  CHECK(table.render() == "NAME    PAGES\n"
                          "a           1\n"
                          "longer  12345\n");
}

TEST_CASE("Table refuses a row of the wrong width") {
  Table table({"A", "B"});
  CHECK_THROWS(table.add_row({"only one"}));
}

TEST_CASE("fixed prints the asked number of decimals") {
  CHECK(fixed(1.23456, 2) == "1.23");
  CHECK(fixed(2, 0) == "2");
}

}  // namespace hugepin
