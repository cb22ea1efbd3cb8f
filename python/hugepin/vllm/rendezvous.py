"""The files the plug-in's processes leave each other, in one folder per arena: <root>/hugepin-vllm.<arena>/.

  rank-<r>.json   what rank r's worker process found of its KV (its planner entry) and its pid,
                  written by the worker in get_worker; the scheduler process plans from them.
  arena.json      the arena's name, the scheduler process's pid and the plan's fingerprint,
                  written once the arena exists: the ranks attach when they see it.
  index.json      the manager's stored blocks (key -> chunk) when the arena is kept for the next
                  engine (hugepin_daemon_socket), written at shutdown and read when adopting.

vLLM makes the workers' KV (and so calls get_worker) before it makes the scheduler, and the scheduler
(get_manager) needs every rank's layout to plan one arena for all of them; a worker cannot wait for
the scheduler there without stalling the engine. So the workers write, the scheduler reads.

Every process of one engine runs as one user. The folder is created 0700; an existing one, and
every file read, is opened without following links and checked (a folder or regular file owned by
this user, writable by no one else) before use, so that nobody else can plant a layout. Files are
written whole under a temporary name, then renamed.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import time

from hugepin.errors import InvalidArgumentError, PermissionDeniedError, TimedOutError

_MAX_FILE = 64 << 20


def _refuse(path: str, why: str):
    return PermissionDeniedError(f"{path}: {why}: remove it, or set hugepin_rendezvous_dir elsewhere")


class Rendezvous:
    """The plug-in's folder of arena `arena` under `root` (created when missing)."""

    def __init__(self, root: str, arena: str):
        self.path = os.path.join(root, f"hugepin-vllm.{arena}")
        try:
            os.mkdir(self.path, 0o700)
        except FileExistsError:
            pass
        except OSError as error:
            raise InvalidArgumentError(f"hugepin_rendezvous_dir {root!r}: cannot create {self.path}: "
                                       f"{error.strerror}") from None
        info = os.lstat(self.path)
        if not stat.S_ISDIR(info.st_mode):
            raise _refuse(self.path, "not a folder")
        if info.st_uid != os.geteuid():
            raise _refuse(self.path, f"owned by uid {info.st_uid}, not this process's {os.geteuid()}")
        if info.st_mode & 0o022:
            raise _refuse(self.path, f"writable by others (mode {stat.S_IMODE(info.st_mode):04o})")

    # ------------------------------------------------------------------ files

    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def write(self, name: str, value) -> None:
        """Writes `value` as JSON to `name`, whole (a temporary file, then a rename)."""
        temporary = self._file(f".{name}.{os.getpid()}.tmp")
        data = json.dumps(value, separators=(",", ":")).encode()
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.rename(temporary, self._file(name))

    def read(self, name: str):
        """The JSON value of `name`, or None when there is no such file. PermissionDeniedError for a
        file that is not a regular file of this user writable by no one else; InvalidArgumentError
        for one that is not JSON."""
        path = self._file(name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise _refuse(path, "a symbolic link") from None
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise _refuse(path, "not a regular file")
            if info.st_uid != os.geteuid() or info.st_mode & 0o022:
                raise _refuse(path, f"owned by uid {info.st_uid} with mode {stat.S_IMODE(info.st_mode):04o}")
            if info.st_size > _MAX_FILE:
                raise _refuse(path, f"{info.st_size} bytes, more than any file the plug-in writes")
            chunks = []
            while True:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(fd)
        try:
            return json.loads(b"".join(chunks))
        except ValueError as error:
            raise InvalidArgumentError(f"{path}: not JSON ({error})") from None

    def remove(self, name: str) -> None:
        try:
            os.unlink(self._file(name))
        except FileNotFoundError:
            pass

    def remove_all(self) -> None:
        """Removes the folder and what the plug-in wrote in it."""
        for name in os.listdir(self.path):
            if name.startswith("rank-") or name in ("arena.json", "index.json") or name.endswith(".tmp"):
                self.remove(name)
        try:
            os.rmdir(self.path)
        except OSError:
            pass

    # ------------------------------------------------------------------ rank layouts

    def publish_rank(self, rank: int, entry: dict) -> None:
        """Rank `rank`'s planner entry, with this process's pid."""
        self.write(f"rank-{rank}.json", {"pid": os.getpid(), "entry": entry})

    def collect_ranks(self, ranks: int, timeout: float) -> list[dict]:
        """Every rank's planner entry, in flat rank order, once each rank 0 .. ranks-1 has one from a
        live process; TimedOutError naming the ranks missing after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            entries, missing = [], []
            for rank in range(ranks):
                published = self.read(f"rank-{rank}.json")
                if published is None or not _alive(published.get("pid")):
                    missing.append(rank)
                else:
                    entries.append(published["entry"])
            if not missing:
                return entries
            if time.monotonic() >= deadline:
                raise TimedOutError(f"{self.path}: no KV layout from rank(s) {missing} of {ranks} after {timeout:g} s "
                                    "(their worker processes have not registered their KV caches)")
            time.sleep(0.02)


def _alive(pid) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
