"""Schedulers: one per engine (hugepin_scheduler), the one consumer of every rank's ring.

    plan = hugepin.Plan.from_dict(planner_input)
    with hugepin.Scheduler.create("kv", plan) as scheduler:   # the arena and the scheduler role
        job = scheduler.dispatch(hugepin.STORE, [3, 4])        # pins; then send job to the ranks
        progress = scheduler.poll(timeout=0.001)              # quorum: progress.completed, .failed
        scheduler.retire(3)                                   # evicted
        epoch = scheduler.begin_epoch()                       # a step's GPU work was queued
        free = scheduler.reusable()                           # no copy holds them, fence passed

How a job reaches the workers is the engine's business (its own RPC). poll() sleeps with the GIL
released until a job could reach quorum (not at each rank's report). One thread calls a Scheduler
at a time.
"""

from __future__ import annotations

import ctypes
import enum
import os
import sys
from dataclasses import dataclass, field

from hugepin import _abi, _args
from hugepin.errors import InvalidArgumentError
from hugepin.plan import Plan
from hugepin.worker import JobKind


class FailureCause(enum.IntEnum):
    COPY_FAILED = 0        # the rank reported its copy failed
    RANK_UNRESPONSIVE = 1  # the rank stopped answering (its process exited, or fell silent)


@dataclass(frozen=True)
class FailedJob:
    """A job that can never complete, and why (hugepin_failed_job). Its chunks come back through
    retire() and the fence as any chunk does; a silent rank's stay quarantined until its process
    is gone."""
    job: int
    kind: JobKind
    rank: int
    cause: FailureCause
    error: int     # the rank's errno for a failed copy, else 0
    message: str   # one line naming the rank


@dataclass(frozen=True)
class Progress:
    """What one poll() applied: jobs every rank reported (the quorum), jobs that failed."""
    completed: list = field(default_factory=list)
    failed: list = field(default_factory=list)
    reports: int = 0


@dataclass(frozen=True)
class ArenaInfo:
    tp: int
    pp: int
    ranks: int
    chunk_count: int
    blocks_per_chunk: int
    ring_capacity: int
    creator_pid: int


@dataclass(frozen=True)
class Figures:
    """The scheduler's counters (hugepin_scheduler_figures)."""
    live_ranks: int
    pinned_chunks: int
    quarantined_chunks: int
    jobs_waiting: int
    current_epoch: int
    all_rank_epoch: int
    jobs_dispatched: int
    jobs_completed: int
    jobs_failed: int
    reports_applied: int
    reports_rejected: int


def arena_options(page_size=0, strict: bool = False, ring_capacity: int = 0, prefault_threads: int = 0):
    """hugepin_arena_options: page_size 0 (the plan's), '4K', '2M', '1G' or bytes; strict: any fallback
    fails; ring_capacity: reports per rank ring, a power of two (0: 4096); prefault_threads per node
    (0: the node's CPUs, at most 16)."""
    return _abi.options(_abi.ArenaOptions, page_size=_args.page_size(page_size), strict=1 if strict else 0,
                        ring_capacity=_args.uint32(ring_capacity, "ring_capacity"),
                        prefault_threads=_args.uint32(prefault_threads, "prefault_threads"))


def _scheduler_options(max_jobs_in_flight: int = 0, waive_compute_barrier: bool = False, keep_arena: bool = False,
                       heartbeat_timeout: float = 0.0):
    if heartbeat_timeout is None:
        raise InvalidArgumentError("heartbeat_timeout = None: give seconds, or 0 for never")
    return _abi.options(_abi.SchedulerOptions, max_jobs_in_flight=_args.uint32(max_jobs_in_flight, "max_jobs_in_flight"),
                        waive_compute_barrier=1 if waive_compute_barrier else 0, keep_arena=1 if keep_arena else 0,
                        heartbeat_timeout_ns=_args.timeout_ns(heartbeat_timeout, "heartbeat_timeout"))


def _job_kind(kind) -> JobKind:
    if isinstance(kind, str) and kind.upper() in JobKind.__members__:
        return JobKind[kind.upper()]
    if isinstance(kind, int) and not isinstance(kind, bool) and kind in (0, 1):
        return JobKind(kind)
    raise InvalidArgumentError(f"kind = {kind!r}: give hugepin.STORE, hugepin.LOAD, 'store' or 'load'")


def _chunk_array(chunks):
    """Chunk ids as a (pointer-compatible array, count): a C-contiguous uint32 numpy array as is,
    anything else (a list, a torch tensor) converted, each id checked to fit hugepin_chunk_id."""
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(chunks, numpy.ndarray) and chunks.dtype == numpy.uint32 \
            and chunks.ndim == 1 and chunks.flags.c_contiguous and chunks.size > 0:
        return chunks.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32)), chunks.size
    if isinstance(chunks, (str, bytes)) or not hasattr(chunks, "__iter__"):
        raise InvalidArgumentError(f"chunks = {chunks!r}: give a sequence of chunk ids")
    values = chunks.tolist() if hasattr(chunks, "tolist") else list(chunks)
    ids = [_args.uint32(value, f"chunks[{i}]") for i, value in enumerate(values)]
    return (ctypes.c_uint32 * max(1, len(ids)))(*ids), len(ids)


class Scheduler:
    """The scheduler role of one arena: dispatch, quorum, fence, dead ranks. Make one with create()
    or adopt(); usable as a context manager (closes on exit)."""

    def __init__(self, handle: int, arena: str):
        """Internal: use create() or adopt()."""
        self._handle = handle
        self._pid = os.getpid()
        self.arena = arena

    @classmethod
    def create(cls, arena: str, plan: Plan, *, page_size=0, strict: bool = False, ring_capacity: int = 0,
               prefault_threads: int = 0, max_jobs_in_flight: int = 0, waive_compute_barrier: bool = False,
               keep_arena: bool = False, heartbeat_timeout: float = 0.0) -> Scheduler:
        """Creates arena `arena` from `plan` (prefaulted, placed on its nodes) and takes its scheduler
        role. ExistsError when it exists; a failure leaves nothing behind. Arena options as
        arena_options(); `max_jobs_in_flight` (0: 4096); `waive_compute_barrier`: holds alone decide
        reuse (synchronous engines); `keep_arena`: close() leaves the arena for a later adopt();
        `heartbeat_timeout`: seconds after which a silent live rank is declared unresponsive (0: never)."""
        if not isinstance(plan, Plan):
            raise InvalidArgumentError(f"plan is a {type(plan).__name__}: give a hugepin.Plan")
        where = arena_options(page_size, strict, ring_capacity, prefault_threads)
        options = _scheduler_options(max_jobs_in_flight, waive_compute_barrier, keep_arena, heartbeat_timeout)
        handle = ctypes.c_void_p()
        _abi.check(_abi.lib.hugepin_scheduler_create(_args.name(arena, "arena"), plan._handle, ctypes.byref(where),
                                                     ctypes.byref(options), ctypes.byref(handle)))
        return cls(handle.value, arena)

    @classmethod
    def adopt(cls, arena: str, *, max_jobs_in_flight: int = 0, waive_compute_barrier: bool = False,
              heartbeat_timeout: float = 0.0) -> Scheduler:
        """Takes the scheduler role of an existing arena (one hugepind keeps, or one created with
        keep_arena). NotFoundError: no such arena; BusyError naming the pid while another live
        process holds the role."""
        options = _scheduler_options(max_jobs_in_flight, waive_compute_barrier, False, heartbeat_timeout)
        handle = ctypes.c_void_p()
        _abi.check(_abi.lib.hugepin_scheduler_adopt(_args.name(arena, "arena"), ctypes.byref(options),
                                                    ctypes.byref(handle)))
        return cls(handle.value, arena)

    @property
    def info(self) -> ArenaInfo:
        out = _abi.ArenaInfo()
        self._check(_abi.lib.hugepin_scheduler_get_info(self._handle, ctypes.byref(out)))
        return ArenaInfo(**_abi.fields(out))

    def dispatch(self, kind, chunks) -> int:
        """Pins every chunk of `chunks` (a copy hold) and opens a job every rank must report; returns
        its id, to send to the ranks only now. `kind`: hugepin.STORE or LOAD ('store', 'load').
        InvalidArgumentError for no chunks; OutOfRangeError naming a chunk out of range; BusyError
        when a chunk is retired or quarantined, a rank is not live, or too many jobs are open."""
        kind = _job_kind(kind)
        array, count = _chunk_array(chunks)
        job = ctypes.c_uint64()
        self._check(_abi.lib.hugepin_scheduler_dispatch(self._handle, int(kind), array, count, ctypes.byref(job)))
        return job.value

    def poll(self, timeout: float | None = 0.0) -> Progress:
        """Applies every report waiting on the rings; when there is none, first waits up to `timeout`
        seconds (0: do not wait; None: no limit) until a job could reach quorum, the all-rank epoch
        advance (a retired chunk pass the fence), or a rank fails a copy, attaches or detaches.
        Then notices rank processes that exited (their jobs fail; their chunks stay quarantined
        until the process is gone), and takes the jobs that completed (every rank reported them)
        and failed since the last poll, oldest first."""
        applied = ctypes.c_size_t()
        self._check(_abi.lib.hugepin_scheduler_drain(self._handle, _args.timeout_ns(timeout), ctypes.byref(applied)))
        count = ctypes.c_size_t()
        completed = []
        done = (ctypes.c_uint64 * 256)()
        while True:
            self._check(_abi.lib.hugepin_scheduler_completed(self._handle, done, 256, ctypes.byref(count)))
            completed.extend(done[:count.value])
            if count.value < 256:
                break
        failed = []
        batch = (_abi.FailedJob * 16)()
        while True:
            self._check(_abi.lib.hugepin_scheduler_failed(self._handle, batch, 16, ctypes.byref(count)))
            for job in batch[:count.value]:
                failed.append(FailedJob(job.job, JobKind(job.kind), job.rank, FailureCause(job.cause), job.error,
                                        job.message.decode(errors="replace")))
            if count.value < 16:
                break
        return Progress(completed, failed, applied.value)

    def retire(self, chunk: int) -> None:
        """The engine gives chunk `chunk` up (evicted): it comes back from reusable() once no copy
        holds it and every rank released the epoch it was retired in. OutOfRangeError: no such
        chunk; InvalidArgumentError: already retired."""
        self._check(_abi.lib.hugepin_scheduler_retire(self._handle, _args.uint32(chunk, "chunk")))

    def begin_epoch(self) -> int:
        """Closes the current compute epoch and returns the new one."""
        epoch = ctypes.c_uint64()
        self._check(_abi.lib.hugepin_scheduler_begin_epoch(self._handle, ctypes.byref(epoch)))
        return epoch.value

    def reusable(self) -> list[int]:
        """Takes the chunks that became reusable (no holds, fence passed): each is the engine's again.
        Reports arrive through poll(): call it first."""
        chunks = []
        out = (ctypes.c_uint32 * 256)()
        count = ctypes.c_size_t()
        while True:
            self._check(_abi.lib.hugepin_scheduler_reusable(self._handle, out, 256, ctypes.byref(count)))
            chunks.extend(out[:count.value])
            if count.value < 256:
                return chunks

    def figures(self) -> Figures:
        out = _abi.SchedulerFigures()
        self._check(_abi.lib.hugepin_scheduler_get_figures(self._handle, ctypes.byref(out)))
        return Figures(**_abi.fields(out))

    def close(self) -> None:
        """Gives the role back and destroys the arena when this scheduler created it (unless
        keep_arena). Closing twice is a no-op; a forked child never closes its parent's scheduler
        (it would destroy the parent's arena)."""
        handle, self._handle = self._handle, None
        if handle is not None and os.getpid() == self._pid:
            _abi.check(_abi.lib.hugepin_scheduler_close(handle))

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exception) -> None:
        self.close()

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle is not None and os.getpid() == self._pid:
            self._handle = None
            _abi.lib.hugepin_scheduler_close(handle)

    def __repr__(self) -> str:
        return f"<hugepin.Scheduler arena '{self.arena}'{' closed' if self._handle is None else ''}>"

    def _check(self, rc: int) -> None:
        if rc < 0:
            if self._handle is None:
                raise InvalidArgumentError(f"the scheduler of arena '{self.arena}' is closed")
            raise _abi.failure(rc)


def create_arena(name: str, plan: Plan, **options) -> None:
    """Creates arena `name` from `plan` without taking the scheduler role (options as
    arena_options()). ExistsError when it exists; a failure leaves nothing behind."""
    if not isinstance(plan, Plan):
        raise InvalidArgumentError(f"plan is a {type(plan).__name__}: give a hugepin.Plan")
    where = arena_options(**options)
    _abi.check(_abi.lib.hugepin_arena_create(_args.name(name, "name"), plan._handle, ctypes.byref(where)))


def destroy_arena(name: str) -> None:
    """Removes arena `name`'s control segment and region files. NotFoundError: no such arena."""
    _abi.check(_abi.lib.hugepin_arena_destroy(_args.name(name, "name")))


def arena_info(name: str) -> ArenaInfo:
    """What arena `name` holds, read from its control segment. NotFoundError: no such arena."""
    out = _abi.ArenaInfo()
    _abi.check(_abi.lib.hugepin_arena_get_info(_args.name(name, "name"), ctypes.byref(out)))
    return ArenaInfo(**_abi.fields(out))
