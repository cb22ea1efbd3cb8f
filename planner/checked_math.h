// 64-bit arithmetic that refuses to wrap: every size the planner computes goes through these, so
// an input that would overflow is rejected with a message instead of producing a small plan.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/error.h"

namespace hugepin::planner {

// a * b. Throws Error("<what>: <a> * <b> overflows 64 bits") when it does not fit.
inline uint64_t checked_mul(uint64_t a, uint64_t b, std::string_view what) {
  uint64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) throw Error(cat(what, ": ", a, " * ", b, " overflows 64 bits"));
  return product;
}

// a + b. Throws Error("<what>: <a> + <b> overflows 64 bits") when it does not fit.
inline uint64_t checked_add(uint64_t a, uint64_t b, std::string_view what) {
  uint64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) throw Error(cat(what, ": ", a, " + ", b, " overflows 64 bits"));
  return sum;
}

}  // namespace hugepin::planner
