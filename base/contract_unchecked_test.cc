// In a build that does not check contracts, HUGEPIN_REQUIRE costs nothing: this file is compiled as
// such a build is, whatever the configuration (tests/contract_test.cc covers checked builds).
#undef HUGEPIN_CONTRACTS
#ifndef NDEBUG
#define NDEBUG
#endif
#include "base/contract.h"

#include <doctest/doctest.h>

namespace hugepin {

TEST_CASE("an unchecked build evaluates neither a contract's condition nor its values") {
  static_assert(HUGEPIN_CONTRACTS_CHECKED == 0);
  int evaluated = 0;
  auto condition = [&] {
    ++evaluated;
    return false;
  };
  HUGEPIN_REQUIRE(condition(), "value ", ++evaluated);
  CHECK(evaluated == 0);
}

}  // namespace hugepin
