#include "daemon/authorize.h"

#include <algorithm>

#include "base/error.h"

namespace hugepin::daemon {

bool peer_in_group(const PeerCredentials& peer, gid_t group) {
  return peer.gid == group || std::find(peer.groups.begin(), peer.groups.end(), group) != peer.groups.end();
}

Decision authorize(const PeerCredentials& peer, Operation op, std::string_view arena,
                   std::optional<uid_t> arena_owner, std::optional<gid_t> group) {
  if (peer.uid == 0) return {true, "root"};
  if (group && peer_in_group(peer, *group)) return {true, cat("group ", *group)};
  const bool names_arena = op == Operation::kDestroy || op == Operation::kResize;
  if (names_arena && arena_owner && *arena_owner == peer.uid) return {true, cat("owner of arena '", arena, "'")};
  std::string who = group ? cat("root, members of group ", *group) : std::string("root");
  if (names_arena) who += cat(" or the owner of arena '", arena, "'");
  return {false, cat(operation_name(op), " is refused for uid ", peer.uid, " (pid ", peer.pid, "): only ", who,
                     " may ask for it")};
}

}  // namespace hugepin::daemon
