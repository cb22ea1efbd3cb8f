// What tests ask of error messages: the text a call throws, and whether a text holds a part.
#pragma once

#include <functional>
#include <string>

#include "base/error.h"

namespace hugepin::test {

// The message of the Error `call` throws; "" when it throws none.
inline std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace hugepin::test
