"""Checks and conversions of the package's arguments before they reach the C ABI. Each refusal is an
InvalidArgumentError or OutOfRangeError whose message names the argument and its value; nothing is
called, so nothing changes.

numpy and torch are looked up in sys.modules, never imported here: an array of either can only
exist once its module was imported, and the package must import without them.
"""

from __future__ import annotations

import ctypes
import operator
import sys

from hugepin.errors import InvalidArgumentError, OutOfRangeError

_U32 = 1 << 32
_U64 = 1 << 64


def integer(value, what: str, limit: int = _U64) -> int:
    """`value` as an int in [0, limit)."""
    try:
        number = operator.index(value)
    except TypeError:
        raise InvalidArgumentError(f"{what} = {value!r}: not an integer") from None
    if number < 0 or number >= limit:
        raise OutOfRangeError(f"{what} = {number}: must be in [0, {limit})")
    return number


def uint32(value, what: str) -> int:
    return integer(value, what, _U32)


def job_id(value) -> int:
    """A job id: from 1 (hugepin_job_id)."""
    job = integer(value, "job")
    if job == 0:
        raise OutOfRangeError("job = 0: job ids start at 1")
    return job


def name(value, what: str) -> bytes:
    """An arena name as the C ABI takes it (the library checks its spelling)."""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{what} = {value!r}: not a str")
    return value.encode()


def timeout_ns(seconds, what: str = "timeout") -> int:
    """Seconds (None: no limit) as the C ABI's nanoseconds (-1: no limit)."""
    if seconds is None:
        return -1
    try:
        value = float(seconds)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{what} = {seconds!r}: not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise InvalidArgumentError(f"{what} = {seconds!r}: must be a finite number of seconds, 0 or more")
    return int(value * 1e9)


_SIZES = {"4K": 4096, "2M": 2 << 20, "1G": 1 << 30}


def page_size(value) -> int:
    """0 (the plan's), 4096, 2 MiB or 1 GiB, given as bytes or as '4K', '2M', '1G'."""
    if isinstance(value, str):
        if value.upper() not in _SIZES:
            raise InvalidArgumentError(f"page_size = {value!r}: give '4K', '2M' or '1G'")
        return _SIZES[value.upper()]
    return integer(value, "page_size")


def device_index(device) -> int:
    """A GPU as an index: an int, 'cuda', 'cuda:N' or a torch.device of type cuda."""
    if isinstance(device, str):
        kind, _, index = device.partition(":")
        if kind == "cuda" and (index == "" or index.isdigit()):
            return int(index or 0)
        raise InvalidArgumentError(f"device = {device!r}: not a CUDA device ('cuda:N' or an index)")
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(device, torch.device):
        if device.type != "cuda":
            raise InvalidArgumentError(f"device = {device}: not a CUDA device")
        return device.index if device.index is not None else torch.cuda.current_device()
    return integer(device, "device", 1 << 31)


# cudaStreamLegacy: the legacy default stream, named explicitly. The C ABI reads NULL as "the worker's
# own stream" (non-blocking: it does not wait for the default stream), so a handle of 0 (torch's
# default stream) goes down as this, or a copy could start before the work queued ahead of it.
_CUDA_STREAM_LEGACY = 1


def stream_handle(stream):
    """A cudaStream_t for the C ABI. None: the worker's own stream. Otherwise a raw handle, a
    torch.cuda.Stream (its cuda_stream), or any object with `cuda_stream` or the __cuda_stream__
    protocol; a handle of 0 is the default stream (passed as cudaStreamLegacy)."""
    if stream is None:
        return None
    handle = stream if type(stream) is int else getattr(stream, "cuda_stream", None)
    if handle is None and hasattr(stream, "__cuda_stream__"):
        handle = stream.__cuda_stream__()[1]
    if not isinstance(handle, int) or handle < 0:
        raise InvalidArgumentError(f"stream = {stream!r}: give a torch.cuda.Stream, a raw cudaStream_t or None")
    return handle or _CUDA_STREAM_LEGACY


def _pairs_refused(why: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"pairs {why}: give an int64 array of N x 2 (src, dst) block pairs, numpy or a "
                                "CPU torch tensor, C-contiguous")


def block_pairs(pairs) -> tuple[int, int]:
    """The address and count of an N x 2 int64 array of (src, dst) block pairs, numpy or a CPU
    torch tensor, without a copy. Costs a few attribute reads: this runs on every store and load."""
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(pairs, numpy.ndarray):
        dtype = pairs.dtype
        if dtype.kind not in "iu" or dtype.itemsize != 8 or not dtype.isnative:
            raise _pairs_refused(f"has dtype {dtype}")
        shape = pairs.shape
        if len(shape) != 2 or shape[1] != 2:
            raise _pairs_refused(f"has shape {shape}")
        flags = pairs.flags
        if not flags.c_contiguous or not flags.aligned:
            raise _pairs_refused(f"has strides {pairs.strides} (not C-contiguous)")
        if shape[0] == 0:
            return 0, 0
        if flags.writeable:  # from_buffer: about a third of __array_interface__'s cost
            return ctypes.addressof(ctypes.c_char.from_buffer(pairs)), shape[0]
        return pairs.__array_interface__["data"][0], shape[0]
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(pairs, torch.Tensor):
        if pairs.dtype is not torch.int64:
            raise _pairs_refused(f"has dtype {pairs.dtype}")
        if pairs.dim() != 2 or pairs.shape[1] != 2:
            raise _pairs_refused(f"has shape {tuple(pairs.shape)}")
        if not pairs.is_cpu:
            raise _pairs_refused(f"is on device {pairs.device}")
        if not pairs.is_contiguous():
            raise _pairs_refused(f"has strides {pairs.stride()} (not contiguous)")
        return pairs.data_ptr(), pairs.shape[0]
    raise _pairs_refused(f"is a {type(pairs).__name__}")


def first_negative_pair(pairs) -> str | None:
    """'pairs[i] = (src, dst)' for the first pair with a negative index, if any (for the message
    of a refused store or load: the library sees -1 as 2^64 - 1)."""
    rows = pairs.tolist()
    for i, (src, dst) in enumerate(rows):
        if src < 0 or dst < 0:
            return f"pairs[{i}] = ({src}, {dst})"
    return None
