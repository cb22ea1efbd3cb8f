// The status of a path itself, through the Os seam: what adoption, stale-file detection,
// quarantine and the request socket all ask before they act on a file.
#pragma once

#include <sys/stat.h>

#include <optional>
#include <string>

#include "base/os.h"

namespace hugepin {

// fstat of `path` opened with O_PATH | O_NOFOLLOW: a symbolic link is described, not followed,
// and no permission on the file is needed. nullopt when the path cannot be opened or fstat fails.
std::optional<struct stat> stat_no_follow(Os& os, const std::string& path);

}  // namespace hugepin
