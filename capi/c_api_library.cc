// The library part of the C ABI: versions and the last error.
#include "hugepin/hugepin.h"

#include "capi/c_api_guard.h"

namespace hugepin::capi {

std::string& last_error() {
  thread_local std::string message;
  return message;
}

int fail(int code, std::string_view message) {
  last_error().assign(message);
  return -code;
}

}  // namespace hugepin::capi

extern "C" {

int hugepin_version(void) { return HUGEPIN_VERSION; }

const char* hugepin_version_string(void) {
#define HUGEPIN_STRINGIFY_(x) #x
#define HUGEPIN_STRINGIFY(x) HUGEPIN_STRINGIFY_(x)
  return HUGEPIN_STRINGIFY(HUGEPIN_VERSION_MAJOR) "." HUGEPIN_STRINGIFY(HUGEPIN_VERSION_MINOR) "." HUGEPIN_STRINGIFY(
      HUGEPIN_VERSION_PATCH);
}

const char* hugepin_last_error(void) { return hugepin::capi::last_error().c_str(); }

}  // extern "C"
