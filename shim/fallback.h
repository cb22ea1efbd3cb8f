// Why the shim hands a request to CUDA instead of serving it.
#pragma once

#include <string>
#include <utility>

#include "base/error.h"

namespace hugepin {

// A request the shim does not serve: `cause` is a short key (one warning per key per process),
// the message one line naming the values ("no hugetlbfs mount for 2M pages (hugepin pool mount
// --pagesize 2M)"). Whoever throws it has released everything the attempt took.
class Fallback : public Error {
 public:
  Fallback(std::string cause, const std::string& message) : Error(message), cause_(std::move(cause)) {}
  const std::string& cause() const { return cause_; }

 private:
  std::string cause_;
};

}  // namespace hugepin
