// Running part of a test in a forked child: to see it die without taking the runner with it, or
// to act as another local user, uid 65534 (nobody), as a hostile or merely unprivileged user would
// (the tests run as root).
#pragma once

#include <sys/types.h>

#include <functional>
#include <vector>

namespace hugepin::test {

inline constexpr uid_t kNobodyUid = 65534;

// Runs `body` in a forked child, waits for it, and returns its exit status, or -signal when a
// signal ended it (a body may raise SIGKILL to play a crash). The child exits 0 when body returns
// true, 1 when false, 2 when it throws (printing why). The one way tests run work in a child and
// wait for it; a child that must run alongside the test (killed, or waited on later) is forked by
// hand.
int run_in_child(const std::function<bool()>& body);

// The same as uid 65534 (nobody) with primary group `gid` and supplementary groups `groups` (2
// also when the child cannot take that identity).
int run_as_nobody(gid_t gid, const std::vector<gid_t>& groups, const std::function<bool()>& body);

// The same with group 65534 (nogroup) and no supplementary groups.
inline int run_as_nobody(const std::function<bool()>& body) { return run_as_nobody(65534, {}, body); }

}  // namespace hugepin::test
