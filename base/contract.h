// Contracts: the REQUIRES lines of the headers, checked.
//
// HUGEPIN_REQUIRE(condition, parts...) states a precondition at the top of the function whose
// header says REQUIRES. In a checked build, a false condition is a bug in the caller: the process
// writes one line to stderr and aborts (a core, not an exception that a catch-all in the shim or
// a scheduler loop would swallow, and no more writes to shared memory from a caller that is
// already wrong):
//
//   hugepin: contract violated at /src/hugepin/ipc/report_ring.cc:41: ReportRing::memsize(capacity) != 0 (capacity 3)
//
// `parts`, streamed after the condition (as cat() does), name the values at fault. In other builds
// the macro compiles to nothing: neither the condition nor the parts are evaluated, so hot paths
// (a ring's push and pop, OffloadScheduler::apply) pay nothing for their checks.
//
// Checked builds: those without NDEBUG (CMAKE_BUILD_TYPE=Debug), and any build configured with
// -DHUGEPIN_CONTRACTS=ON (which defines HUGEPIN_CONTRACTS for every target, so that a check in an
// inline function reads the same in every file). tests/contract_test.cc skips in other builds.
//
// Misuse that an API reports as an error in every build (a header that says "Throws Error when
// ...") stays that: those checks are part of the API, not contracts, and are not written with this
// macro. A REQUIRES that cannot be checked (memory that must stay valid until a callback, an
// ordering of stores) says so where it is stated.
#pragma once

#include <string>
#include <string_view>

#include "base/error.h"

#if defined(HUGEPIN_CONTRACTS) || !defined(NDEBUG)
#define HUGEPIN_CONTRACTS_CHECKED 1
#else
#define HUGEPIN_CONTRACTS_CHECKED 0
#endif

namespace hugepin {

// Writes "hugepin: contract violated at <file>:<line>: <condition> (<values>)" to stderr in one
// write and aborts. `values` may be empty.
[[noreturn]] void contract_violated(const char* file, int line, const char* condition, std::string_view values) noexcept;

}  // namespace hugepin

#if HUGEPIN_CONTRACTS_CHECKED
#define HUGEPIN_REQUIRE(condition, ...)                                                       \
  do {                                                                                        \
    if (!(condition)) [[unlikely]] {                                                          \
      ::hugepin::contract_violated(__FILE__, __LINE__, #condition,                            \
                                   ::hugepin::cat("" __VA_OPT__(, ) __VA_ARGS__));            \
    }                                                                                         \
  } while (0)
#else
// Compiled, never run: the condition and the parts still name real things, and a variable used
// only by a check is not "unused".
#define HUGEPIN_REQUIRE(condition, ...)                                 \
  do {                                                                  \
    if (false) {                                                        \
      (void)(condition);                                                \
      (void)::hugepin::cat("" __VA_OPT__(, ) __VA_ARGS__);              \
    }                                                                   \
  } while (0)
#endif
