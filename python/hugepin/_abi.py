"""libhugepin's C ABI (include/hugepin/hugepin.h) as ctypes sees it: the library, found and loaded
once, its structures and its function prototypes.

Every structure here mirrors one of hugepin.h field by field; tests/test_abi_layout.py compares
each size and offset with what a C compiler makes of the header. The library is loaded with
ctypes.CDLL, which releases the GIL for the length of every foreign call: a store that copies, a
wait or a drain never blocks the interpreter's other threads.
"""

from __future__ import annotations

import ctypes
import os
from ctypes import (POINTER, Structure, c_char, c_char_p, c_int, c_int32, c_int64, c_size_t, c_uint, c_uint32,
                    c_uint64, c_void_p)

from hugepin.errors import Error, error_for

# The C ABI this module mirrors: hugepin.h's HUGEPIN_VERSION_MAJOR and _MINOR. In 0.x a new minor
# version may change the ABI (the CMake package says SameMinorVersion), so both must match.
ABI_VERSION = (0, 3)
SONAME = "libhugepin.so.0"
# hugepin.h's HUGEPIN_COMPLETION_SPIN: WorkerOptions.completion_poll_ns that asks back to back.
COMPLETION_SPIN = -1


class PlanInfo(Structure):
    _fields_ = [("tp", c_uint32), ("pp", c_uint32), ("chunk_count", c_uint32), ("blocks_per_chunk", c_uint64),
                ("page_size", c_uint64), ("payload_bytes_per_block", c_uint64), ("region_bytes", c_uint64)]


class ArenaOptions(Structure):
    _fields_ = [("struct_size", c_uint32), ("ring_capacity", c_uint32), ("page_size", c_uint64), ("strict", c_int),
                ("prefault_threads", c_uint)]


class ArenaInfo(Structure):
    _fields_ = [("tp", c_uint32), ("pp", c_uint32), ("ranks", c_uint32), ("chunk_count", c_uint32),
                ("blocks_per_chunk", c_uint64), ("ring_capacity", c_uint32), ("creator_pid", c_int32)]


class RegionInfo(Structure):
    _fields_ = [("base", c_void_p), ("length", c_uint64), ("page_size", c_uint64), ("numa_node", c_int32),
                ("pinned", c_int32), ("device", c_int32), ("rank", c_uint32), ("segments", c_uint32)]


class SegmentInfo(Structure):
    _fields_ = [("bytes_per_block", c_uint64), ("host_offset", c_uint64), ("host_block_stride", c_uint64),
                ("host_blocks", c_uint64)]


class WorkerOptions(Structure):
    _fields_ = [("struct_size", c_uint32), ("copy_threads", c_uint32), ("post_timeout_ns", c_int64),
                ("time_copies", c_int32), ("completion_poll_ns", c_int64), ("time_copies_every", c_uint32)]


class DeviceSegment(Structure):
    _fields_ = [("device_base", c_uint64), ("block_stride", c_uint64), ("blocks", c_uint64),
                ("bytes_per_block", c_uint64)]


class BlockPair(Structure):
    _fields_ = [("src", c_uint64), ("dst", c_uint64)]


class JobResult(Structure):
    _fields_ = [("job", c_uint64), ("error", c_int32), ("kind", c_uint32), ("bytes", c_uint64),
                ("launch_ns", c_uint64), ("landed_ns", c_uint64), ("copy_ns", c_uint64), ("gpu_done_ns", c_uint64)]


class SchedulerOptions(Structure):
    _fields_ = [("struct_size", c_uint32), ("max_jobs_in_flight", c_uint32), ("waive_compute_barrier", c_int),
                ("keep_arena", c_int), ("heartbeat_timeout_ns", c_int64)]


class FailedJob(Structure):
    _fields_ = [("job", c_uint64), ("kind", c_uint32), ("rank", c_uint32), ("cause", c_int32), ("error", c_int32),
                ("message", c_char * 200)]


class SchedulerFigures(Structure):
    _fields_ = [("live_ranks", c_uint32), ("pinned_chunks", c_uint32), ("quarantined_chunks", c_uint32),
                ("jobs_waiting", c_uint32), ("current_epoch", c_uint64), ("all_rank_epoch", c_uint64),
                ("jobs_dispatched", c_uint64), ("jobs_completed", c_uint64), ("jobs_failed", c_uint64),
                ("reports_applied", c_uint64), ("reports_rejected", c_uint64)]


# Every structure above, by its name in hugepin.h (what the layout test compares).
STRUCTURES = {
    "hugepin_plan_info": PlanInfo,
    "hugepin_arena_options": ArenaOptions,
    "hugepin_arena_info": ArenaInfo,
    "hugepin_region_info": RegionInfo,
    "hugepin_segment_info": SegmentInfo,
    "hugepin_worker_options": WorkerOptions,
    "hugepin_device_segment": DeviceSegment,
    "hugepin_block_pair": BlockPair,
    "hugepin_job_result": JobResult,
    "hugepin_scheduler_options": SchedulerOptions,
    "hugepin_failed_job": FailedJob,
    "hugepin_scheduler_figures": SchedulerFigures,
}

_handle = c_void_p
_P = POINTER
# name: (result type, argument types), as hugepin.h declares them (enums are int).
PROTOTYPES = {
    "hugepin_version": (c_int, []),
    "hugepin_version_string": (c_char_p, []),
    "hugepin_last_error": (c_char_p, []),
    "hugepin_plan_from_json": (c_int, [c_char_p, c_size_t, _P(_handle)]),
    "hugepin_plan_free": (None, [_handle]),
    "hugepin_plan_get_info": (c_int, [_handle, _P(PlanInfo)]),
    "hugepin_plan_to_json": (c_int, [_handle, c_void_p, c_size_t, _P(c_size_t)]),
    "hugepin_arena_create": (c_int, [c_char_p, _handle, _P(ArenaOptions)]),
    "hugepin_arena_destroy": (c_int, [c_char_p]),
    "hugepin_arena_get_info": (c_int, [c_char_p, _P(ArenaInfo)]),
    "hugepin_worker_attach": (c_int, [c_char_p, c_uint32, c_uint32, _P(WorkerOptions), _P(_handle)]),
    "hugepin_worker_detach": (c_int, [_handle]),
    "hugepin_worker_pin": (c_int, [_handle, c_int]),
    "hugepin_worker_get_region": (c_int, [_handle, _P(RegionInfo)]),
    "hugepin_worker_get_segment": (c_int, [_handle, c_uint32, _P(SegmentInfo)]),
    "hugepin_worker_set_device_kv": (c_int, [_handle, _P(DeviceSegment), c_size_t, c_int]),
    "hugepin_worker_store": (c_int, [_handle, c_uint64, c_void_p, c_size_t, c_void_p]),
    "hugepin_worker_load": (c_int, [_handle, c_uint64, c_void_p, c_size_t, c_void_p]),
    "hugepin_worker_post_done": (c_int, [_handle, c_uint64, c_int]),
    "hugepin_worker_release": (c_int, [_handle, c_uint64, c_void_p]),
    "hugepin_worker_heartbeat": (c_int, [_handle]),
    "hugepin_worker_finished": (c_int, [_handle, _P(JobResult), c_size_t, _P(c_size_t)]),
    "hugepin_worker_wait": (c_int, [_handle, c_uint64, c_int64]),
    "hugepin_worker_completion_fd": (c_int, [_handle, _P(c_int)]),
    "hugepin_scheduler_create": (c_int, [c_char_p, _handle, _P(ArenaOptions), _P(SchedulerOptions), _P(_handle)]),
    "hugepin_scheduler_adopt": (c_int, [c_char_p, _P(SchedulerOptions), _P(_handle)]),
    "hugepin_scheduler_close": (c_int, [_handle]),
    "hugepin_scheduler_get_info": (c_int, [_handle, _P(ArenaInfo)]),
    "hugepin_scheduler_dispatch": (c_int, [_handle, c_int, c_void_p, c_size_t, _P(c_uint64)]),
    "hugepin_scheduler_drain": (c_int, [_handle, c_int64, _P(c_size_t)]),
    "hugepin_scheduler_completed": (c_int, [_handle, _P(c_uint64), c_size_t, _P(c_size_t)]),
    "hugepin_scheduler_failed": (c_int, [_handle, _P(FailedJob), c_size_t, _P(c_size_t)]),
    "hugepin_scheduler_retire": (c_int, [_handle, c_uint32]),
    "hugepin_scheduler_begin_epoch": (c_int, [_handle, _P(c_uint64)]),
    "hugepin_scheduler_reusable": (c_int, [_handle, _P(c_uint32), c_size_t, _P(c_size_t)]),
    "hugepin_scheduler_get_figures": (c_int, [_handle, _P(SchedulerFigures)]),
}


def _candidates() -> list[tuple[str, str]]:
    """Where to look for the library, in order, each with the reason it is tried."""
    explicit = os.environ.get("HUGEPIN_LIBRARY")
    if explicit:  # chosen by the user: nothing else is tried
        return [(explicit, "HUGEPIN_LIBRARY")]
    found = []
    try:  # written by CMake into the build tree's and the installed copy of the package
        from hugepin._library_path import LIBRARY
    except ImportError:
        pass
    else:
        path = LIBRARY if os.path.isabs(LIBRARY) else os.path.join(os.path.dirname(__file__), LIBRARY)
        found.append((os.path.normpath(path), "this package's build"))
    found.append((SONAME, "the system's loader"))
    return found


def _load() -> tuple[ctypes.CDLL, str]:
    tried = []
    for path, why in _candidates():
        if os.path.isabs(path) and not os.path.exists(path):
            tried.append(f"{path} ({why}): no such file")
            continue
        try:
            library = ctypes.CDLL(path)
        except OSError as error:
            tried.append(f"{path} ({why}): {error}")
            continue
        return library, path
    raise ImportError("hugepin: cannot load libhugepin; tried " + "; ".join(tried) +
                      ". Set HUGEPIN_LIBRARY to the library's path, or build and install it (docs/python.md)")


def _bind(library: ctypes.CDLL, path: str) -> None:
    for name, (result, arguments) in PROTOTYPES.items():
        try:
            function = getattr(library, name)
        except AttributeError:
            raise ImportError(f"hugepin: {path} has no {name}: it is older than the C ABI "
                              f"{ABI_VERSION[0]}.{ABI_VERSION[1]} this package speaks") from None
        function.restype = result
        function.argtypes = arguments


def _check_version(library: ctypes.CDLL, path: str) -> str:
    version = library.hugepin_version()
    major, minor = version // 10000, version // 100 % 100
    text = library.hugepin_version_string().decode()
    if (major, minor) != ABI_VERSION:
        raise ImportError(f"hugepin: {path} is libhugepin {text}, this package speaks the C ABI of "
                          f"{ABI_VERSION[0]}.{ABI_VERSION[1]}: use the package and the library of one build")
    return text


lib, LIBRARY_PATH = _load()
# The version first: a library of another ABI may lack functions or lay them out differently.
lib.hugepin_version.restype = c_int
lib.hugepin_version.argtypes = []
lib.hugepin_version_string.restype = c_char_p
lib.hugepin_version_string.argtypes = []
VERSION = _check_version(lib, LIBRARY_PATH)
_bind(lib, LIBRARY_PATH)


def options(structure: type, **fields) -> Structure:
    """An options structure with struct_size set (hugepin.h's *_INIT) and the given fields."""
    value = structure(**fields)
    value.struct_size = ctypes.sizeof(structure)
    return value


def failure(code: int) -> Error:
    """The exception for the negative code a call returned, with the calling thread's message."""
    return error_for(code, lib.hugepin_last_error().decode(errors="replace"))


def check(code: int) -> None:
    """Raises the failure of a call that returned `code` (0 or a negative errno-style code)."""
    if code < 0:
        raise failure(code)


def fields(structure: Structure) -> dict:
    """A structure's fields by name (for the package's plain dataclasses of the same fields)."""
    return {name: getattr(structure, name) for name, _ in structure._fields_}
