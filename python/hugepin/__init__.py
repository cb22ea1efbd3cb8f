"""hugepin: hugepage-backed pinned host memory for KV-cache offloading, for Python engines.

A pure-Python package over libhugepin's C ABI (include/hugepin/hugepin.h), through ctypes: no
compiler for Python, any CPython 3.9+, the GIL released during every library call. Memory is
handed over without a copy: Worker.buffer() for numpy.frombuffer and torch.frombuffer,
Worker.host_tensor() for a CPU tensor over the rank's region. torch is optional and imported only
by what needs it (hugepin.tensors).

    import hugepin
    plan = hugepin.Plan.from_dict(planner_input)               # the scheduler process
    scheduler = hugepin.Scheduler.create("kv", plan)
    job = scheduler.dispatch(hugepin.STORE, [3, 4])

    worker = hugepin.Worker("kv", tp_rank, pp_rank)            # each worker process
    worker.pin(device)
    worker.set_device_kv(list(kv.unbind(0)))
    worker.store(job, pairs)                                   # pairs: N x 2 int64

Failures raise hugepin.Error subclasses carrying the library's one-line message.
"""

from hugepin import _abi
from hugepin.errors import (BusyError, CopyFailedError, Error, ExistsError, InvalidArgumentError, NoDeviceError,
                            NotFoundError, OutOfMemoryError, OutOfRangeError, PermissionDeniedError, RingFullError,
                            TimedOutError)
from hugepin.plan import Plan, PlanInfo
from hugepin.scheduler import (ArenaInfo, FailedJob, FailureCause, Figures, Progress, Scheduler, arena_info,
                               create_arena, destroy_arena)
from hugepin.worker import Backend, DeviceSegment, JobKind, JobResult, RegionInfo, SegmentInfo, Worker, attach

__version__ = _abi.VERSION
"""The version of the libhugepin this package loaded ("0.3.0"); its C ABI is checked at import."""

LOAD = JobKind.LOAD
STORE = JobKind.STORE


def library_path() -> str:
    """The libhugepin the package loaded: HUGEPIN_LIBRARY, else the one of this package's build or
    install (next to it), else the system loader's libhugepin.so.0."""
    return _abi.LIBRARY_PATH


__all__ = [
    "ArenaInfo", "Backend", "BusyError", "CopyFailedError", "DeviceSegment", "Error", "ExistsError", "FailedJob",
    "FailureCause", "Figures", "InvalidArgumentError", "JobKind", "JobResult", "LOAD", "NoDeviceError",
    "NotFoundError", "OutOfMemoryError", "OutOfRangeError", "PermissionDeniedError", "Plan", "PlanInfo", "Progress",
    "RegionInfo", "RingFullError", "STORE", "Scheduler", "SegmentInfo", "TimedOutError", "Worker", "arena_info",
    "attach", "create_arena", "destroy_arena", "library_path",
]
