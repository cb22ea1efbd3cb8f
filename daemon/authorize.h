// Who may ask hugepind for what, decided from the peer's credentials as the kernel gave them
// (SO_PEERCRED, SO_PEERGROUPS), never from anything the client says:
//
//   root                          every request
//   members of the configured group (primary or supplementary)   every request
//   the owner of an arena         destroy and resize of that arena (the uid its segment belongs to)
//   anyone else                   nothing: refused, and the refusal logged with pid and uid
//
// Thread-safety: a pure function.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "base/os.h"
#include "daemon/protocol.h"

namespace hugepin::daemon {

struct Decision {
  bool allowed = false;
  std::string reason;  // "root", "group 1000", "owner of arena 'kv'", or why not (one line)
};

// Whether `peer` may run `op`. `arena_owner` is the uid that owns the arena the request names
// (nullopt when it names none, or none by that name exists); `group` the configured group.
Decision authorize(const PeerCredentials& peer, Operation op, std::string_view arena,
                   std::optional<uid_t> arena_owner, std::optional<gid_t> group);

// True when `peer` has `group` as its primary or a supplementary group.
bool peer_in_group(const PeerCredentials& peer, gid_t group);

}  // namespace hugepin::daemon
