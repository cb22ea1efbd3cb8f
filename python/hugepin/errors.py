"""The exceptions of the hugepin package.

Every failure raises a subclass of Error. A failure the library reports carries its one-line
message (hugepin_last_error(), which names the value at fault) and its errno; a bad argument that
the package refuses before calling the library (a pairs array of the wrong dtype, a tensor on the
wrong device) raises InvalidArgumentError with a message of the same kind. In both cases nothing
was copied and nothing changed.
"""

from __future__ import annotations

import errno as _errno


class Error(Exception):
    """A hugepin failure. `errno` is the positive errno-style code (EINVAL, ENOENT, ...), `message`
    the one-line message naming the value at fault (also str(error))."""

    def __init__(self, message: str, errno: int = _errno.EINVAL):
        super().__init__(message)
        self.message = message
        self.errno = errno


class InvalidArgumentError(Error, ValueError):
    """EINVAL: a bad argument (wrong dtype, shape, device or type, a malformed plan, a chunk
    retired twice)."""


class NotFoundError(Error, LookupError):
    """ENOENT: no such arena, or a job this worker never launched."""


class OutOfRangeError(Error, IndexError):
    """ERANGE: a rank, chunk, segment or block pair out of range."""


class BusyError(Error):
    """EBUSY: held by a live process (a rank, the scheduler role), a chunk retired or quarantined,
    too many jobs in flight; or a region still viewed by buffers when its worker detaches."""


class ExistsError(Error):
    """EEXIST: the arena exists already."""


class RingFullError(Error):
    """EAGAIN: a rank's ring stayed full."""


class CopyFailedError(Error):
    """EIO: a copy failed (the job is reported copy-failed)."""


class TimedOutError(Error, TimeoutError):
    """ETIMEDOUT."""


class NoDeviceError(Error):
    """ENODEV: this build of libhugepin has no CUDA, or the GPU cannot be used."""


class OutOfMemoryError(Error, MemoryError):
    """ENOMEM."""


class PermissionDeniedError(Error, PermissionError):
    """EACCES or EPERM: an arena of another user, a file hugepin may not open."""


_BY_ERRNO = {
    _errno.EINVAL: InvalidArgumentError,
    _errno.ENOENT: NotFoundError,
    _errno.ERANGE: OutOfRangeError,
    _errno.EBUSY: BusyError,
    _errno.EEXIST: ExistsError,
    _errno.EAGAIN: RingFullError,
    _errno.EIO: CopyFailedError,
    _errno.ETIMEDOUT: TimedOutError,
    _errno.ENODEV: NoDeviceError,
    _errno.ENOMEM: OutOfMemoryError,
    _errno.EACCES: PermissionDeniedError,
    _errno.EPERM: PermissionDeniedError,
}


def error_for(code: int, message: str) -> Error:
    """The exception for errno `code` (positive or negative) with `message`."""
    code = abs(code)
    return _BY_ERRNO.get(code, Error)(message, code)
