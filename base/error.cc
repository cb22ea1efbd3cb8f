#include "base/error.h"

#include <cstring>

namespace hugepin {

std::string errno_text(int errno_value) {
  const char* name = strerrorname_np(errno_value);
  return cat(strerror(errno_value), " (", name != nullptr ? name : "errno", " ", errno_value, ")");
}

void throw_errno(std::string_view context, int errno_value) {
  throw Error(cat(context, ": ", errno_text(errno_value)), errno_value);
}

}  // namespace hugepin
