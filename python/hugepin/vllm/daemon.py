"""The one question the plug-in asks hugepind: is it serving, and will it look after this arena.

hugepind's requests are JSON lines on a Unix socket (docs/daemon.md, "Requests"). Its `create`
takes a size and a rank count, not a plan with each rank's payload and KV segments, so the plug-in
creates the arena itself and keeps it; hugepind adopts arenas it finds, marks dead workers, and
expires arenas left without owner for its `retention`. This module sends `status` and checks the
arena's name is in hugepind's scope (`arena_prefix`).
"""

from __future__ import annotations

import json
import socket

from hugepin.errors import Error, InvalidArgumentError, NotFoundError


def status(path: str, timeout: float = 5.0) -> dict:
    """hugepind's `status` reply from the socket at `path`. NotFoundError when nothing answers there;
    Error (naming the socket) for a reply that is not a successful status."""
    request = json.dumps({"version": 1, "op": "status"}).encode() + b"\n"
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) as connection:
            connection.settimeout(timeout)
            connection.connect(path)
            connection.sendall(request)
            received = b""
            while not received.endswith(b"\n"):
                chunk = connection.recv(65536)
                if not chunk:
                    break
                received += chunk
    except OSError as error:
        raise NotFoundError(f"hugepin_daemon_socket {path!r}: no hugepind answers there ({error.strerror or error}): "
                            "start it (systemctl start hugepind) or leave the key out") from None
    try:
        reply = json.loads(received)
    except ValueError:
        raise Error(f"hugepin_daemon_socket {path!r}: the reply is not JSON: {received[:120]!r}") from None
    if not isinstance(reply, dict) or not reply.get("ok"):
        error = reply.get("error") if isinstance(reply, dict) else reply
        raise Error(f"hugepin_daemon_socket {path!r}: status refused: {error}")
    return reply


def check_looks_after(path: str, arena: str) -> dict:
    """Asks hugepind at `path` for its status and checks that `arena` is in its scope; returns the
    status. InvalidArgumentError when the name is outside hugepind's arena_prefix."""
    reply = status(path)
    prefix = reply.get("settings", {}).get("arena_prefix", "")
    if not arena.startswith(prefix):
        raise InvalidArgumentError(f"arena {arena!r} is outside hugepind's scope (arena_prefix {prefix!r} at {path}): "
                                   "set hugepin_arena to a name starting with it")
    return reply
