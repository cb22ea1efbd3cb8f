// Running part of a test as another local user: uid 65534 (nobody), as a hostile or merely
// unprivileged user would (the tests run as root).
#pragma once

#include <sys/types.h>

#include <functional>
#include <vector>

namespace hugepin::test {

inline constexpr uid_t kNobodyUid = 65534;

// Runs `body` in a forked child as uid 65534 (nobody) with primary group `gid` and supplementary
// groups `groups`; returns its exit status (0: body returned true, 1: false, 2: it threw, 3: the
// identity could not be taken; -1: killed by a signal).
int run_as_nobody(gid_t gid, const std::vector<gid_t>& groups, const std::function<bool()>& body);

// The same with group 65534 (nogroup) and no supplementary groups.
inline int run_as_nobody(const std::function<bool()>& body) { return run_as_nobody(65534, {}, body); }

}  // namespace hugepin::test
