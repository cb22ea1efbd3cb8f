// How every function of the C ABI (include/hugepin/hugepin.h) turns C++ into C: it runs its body
// inside guarded(), which catches everything, records the message for hugepin_last_error() and
// returns a negative errno-style code. No exception crosses the ABI.
#pragma once

#include <cerrno>
#include <string>
#include <string_view>

#include "base/error.h"

namespace hugepin::capi {

// The calling thread's last failure message.
std::string& last_error();

// Records `message` as the calling thread's last failure and returns -code.
int fail(int code, std::string_view message);

// Runs `body` (which returns 0 or a negative code); an Error becomes -errno_value() (EINVAL when
// it carries none), std::bad_alloc -ENOMEM, anything else -EIO, each with its message.
template <typename Body>
int guarded(Body&& body) noexcept {
  try {
    return body();
  } catch (const Error& error) {
    return fail(error.errno_value() > 0 ? error.errno_value() : EINVAL, error.what());
  } catch (const std::bad_alloc&) {
    return fail(ENOMEM, "out of memory");
  } catch (const std::exception& error) {
    return fail(EIO, error.what());
  } catch (...) {
    return fail(EIO, "unknown failure");
  }
}

// Throws Error(EINVAL) naming `what` when `pointer` is null.
inline void require(const void* pointer, std::string_view what) {
  if (pointer == nullptr) throw Error(cat(what, " is NULL"), EINVAL);
}

// The fields of an options structure of the caller's version: a copy of `defaults` overwritten by
// the first struct_size bytes of `given` (NULL: defaults). Throws Error(EINVAL) when struct_size
// is smaller than the first field.
template <typename Options>
Options read_options(const Options* given, const Options& defaults, std::string_view what) {
  Options options = defaults;
  if (given == nullptr) return options;
  if (given->struct_size < sizeof(given->struct_size)) {
    throw Error(cat(what, ".struct_size = ", given->struct_size, ": set it to sizeof(", what, ")"), EINVAL);
  }
  const size_t bytes = given->struct_size < sizeof(Options) ? given->struct_size : sizeof(Options);
  __builtin_memcpy(&options, given, bytes);
  options.struct_size = sizeof(Options);
  return options;
}

}  // namespace hugepin::capi
