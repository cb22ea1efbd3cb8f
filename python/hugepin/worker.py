"""Workers: one per engine rank process (hugepin_worker).

    with hugepin.Worker("kv", tp_rank, pp_rank) as worker:   # attach: claim the rank, map its region
        worker.pin(device)                                   # page-lock it for the GPU
        worker.set_device_kv([kv[0], kv[1]])                 # the engine's own device KV tensors
        worker.store(job, pairs, stream)                     # returns at once; the report is posted
        worker.load(job, pairs, stream)                      #   when the copies land
        worker.release(epoch, compute_stream)                # compute-release for the fence
        host = worker.host_tensor(0, torch.bfloat16, shape)  # the region as a tensor, no copy

Every call that copies or waits runs with the GIL released (ctypes.CDLL). A Worker is used by one
thread at a time, as hugepin.h says of its handles.
"""

from __future__ import annotations

import ctypes
import enum
import gc
import os
import sys
import weakref
from dataclasses import dataclass

from hugepin import _abi, _args
from hugepin.errors import BusyError, InvalidArgumentError, OutOfRangeError


class Backend(enum.IntEnum):
    """Who copies: hugepin_backend."""
    AUTO = 0  # the GPU when the region is pinned, else host memcpy
    GPU = 1   # CUDA: SM kernels for small blocks, batched DMA for large ones
    HOST = 2  # memcpy on CPU threads (no GPU): the device segments are host memory


class JobKind(enum.IntEnum):
    """hugepin_job_kind."""
    LOAD = 0   # host -> GPU
    STORE = 1  # GPU -> host


@dataclass(frozen=True)
class RegionInfo:
    """One rank's host memory: `base` is valid in this process while its worker is attached."""
    base: int
    length: int      # the whole region, a multiple of page_size
    page_size: int   # as obtained: 4096 (the shared-memory fallback), 2 MiB or 1 GiB
    numa_node: int   # -1 when unknown
    pinned: bool
    device: int      # the GPU it is pinned for; -1 when not pinned
    rank: int        # flat rank: pp_rank * tp + tp_rank
    segments: int


@dataclass(frozen=True)
class SegmentInfo:
    """Where KV segment i lives in the region: host block h (= chunk * blocks_per_chunk + b) starts
    at base + host_offset + h * host_block_stride and holds bytes_per_block bytes."""
    bytes_per_block: int
    host_offset: int
    host_block_stride: int
    host_blocks: int


@dataclass(frozen=True)
class DeviceSegment:
    """One segment of the engine's own device KV: device block b starts at device_base + b *
    block_stride and holds bytes_per_block bytes (the arena's bytes_per_block for that segment).
    hugepin.tensors.device_segment makes one from a torch tensor whose first dimension is blocks."""
    device_base: int
    block_stride: int
    blocks: int
    bytes_per_block: int


@dataclass(frozen=True)
class JobResult:
    """What became of one job on this rank (hugepin_job_result)."""
    job: int
    error: int       # 0, or the negative code of the copy's failure
    kind: JobKind
    bytes: int
    launch_ns: int   # CLOCK_MONOTONIC
    landed_ns: int
    copy_ns: int     # with time_copies, for the jobs it times: the copies' own GPU time (else 0)
    gpu_done_ns: int  # ... and when they ended, CLOCK_MONOTONIC (else 0; 0 too if unreadable)


_store = _abi.lib.hugepin_worker_store
_load = _abi.lib.hugepin_worker_load


def _completion_poll_ns(completion_poll) -> int:
    """Worker's completion_poll as hugepin_worker_options.completion_poll_ns."""
    if completion_poll is None:
        return 0
    if isinstance(completion_poll, str):
        if completion_poll != "spin":
            raise InvalidArgumentError(f"completion_poll = {completion_poll!r}: seconds between polls, or \"spin\"")
        return _abi.COMPLETION_SPIN
    return _args.timeout_ns(completion_poll, "completion_poll")


class Worker:
    """One rank of an arena, attached by this process: its region, pinning, and the copy engine
    over the engine's own device KV. Usable as a context manager (detaches on exit)."""

    def __init__(self, arena: str, tp_rank: int, pp_rank: int = 0, *, copy_threads: int = 0,
                 post_timeout: float | None = None, time_copies: bool = False, time_copies_every: int = 1,
                 completion_poll: float | str = 0):
        """Attaches rank (tp_rank, pp_rank) of arena `arena`: claims the rank, maps its region and
        announces this process to the scheduler. NotFoundError: no such arena; OutOfRangeError: no
        such rank; BusyError: a live process holds the rank. `copy_threads`: CPU threads per copy of
        the host backend (0: 1); `post_timeout`: seconds a report waits for room in a full ring
        (None: 1 s); `time_copies`: time each job's copies on the GPU (JobResult.copy_ns; timing
        events slow the copies beside them, by up to 25% measured: hugepin_worker_options in hugepin.h);
        `time_copies_every`: with time_copies, time one job in this many (0 and 1: all), the same
        jobs on every rank (chosen from the job id); the others' copy_ns is 0;
        `completion_poll`: GPU backend, seconds between polls of a job's event while it waits to
        land (0: sleep until the driver wakes the worker, tens to hundreds of microseconds late;
        25e-6: about 25 us late, polling while jobs wait; "spin": asking back to back while jobs
        wait, within a query's time, for a CPU core busy while jobs are out; the CPU each costs and
        what each moved: hugepin_worker_options in hugepin.h)."""
        self._handle = None
        self.arena, self.tp_rank, self.pp_rank = arena, tp_rank, pp_rank
        options = _abi.options(_abi.WorkerOptions, copy_threads=_args.uint32(copy_threads, "copy_threads"),
                               post_timeout_ns=0 if post_timeout is None else
                               max(1, _args.timeout_ns(post_timeout, "post_timeout")),
                               time_copies=1 if time_copies else 0,
                               time_copies_every=_args.uint32(time_copies_every, "time_copies_every"),
                               completion_poll_ns=_completion_poll_ns(completion_poll))
        handle = ctypes.c_void_p()
        _abi.check(_abi.lib.hugepin_worker_attach(_args.name(arena, "arena"), _args.uint32(tp_rank, "tp_rank"),
                                                  _args.uint32(pp_rank, "pp_rank"), ctypes.byref(options),
                                                  ctypes.byref(handle)))
        self._handle = handle.value
        self._pid = os.getpid()
        self._views = weakref.WeakValueDictionary()  # id -> the ctypes array behind each buffer handed out
        self._device_kv = []             # tensors the copy engine points into, kept alive
        info = _abi.ArenaInfo()
        _abi.check(_abi.lib.hugepin_arena_get_info(arena.encode(), ctypes.byref(info)))
        self.blocks_per_chunk = info.blocks_per_chunk
        self.chunk_count = info.chunk_count
        region = self.region
        self.rank = region.rank
        self.segments = [self._segment(i) for i in range(region.segments)]

    # ---------------------------------------------------------------- memory

    @property
    def region(self) -> RegionInfo:
        """The rank's host memory, now (pinned and device change with pin())."""
        out = _abi.RegionInfo()
        self._check(_abi.lib.hugepin_worker_get_region(self._handle, ctypes.byref(out)))
        values = _abi.fields(out)
        values["base"] = values["base"] or 0
        values["pinned"] = bool(values["pinned"])
        return RegionInfo(**values)

    def _segment(self, index: int) -> SegmentInfo:
        out = _abi.SegmentInfo()
        self._check(_abi.lib.hugepin_worker_get_segment(self._handle, index, ctypes.byref(out)))
        return SegmentInfo(**_abi.fields(out))

    def segment(self, index: int) -> SegmentInfo:
        """Segment `index` of the rank's KV in its region. OutOfRangeError past the last."""
        if not isinstance(index, int) or not 0 <= index < len(self.segments):
            raise OutOfRangeError(f"segment {index!r} is out of range (rank {self.rank} has "
                                  f"{len(self.segments)})")
        return self.segments[index]

    def buffer(self, segment: int | None = None) -> memoryview:
        """The whole region, or one KV segment of it (its host_blocks x host_block_stride bytes), as a
        writable memoryview of bytes over the mapping itself, no copy: numpy.frombuffer and
        torch.frombuffer work on it. Every buffer and every array or tensor made from it keeps this
        worker attached: detach() refuses while one lives."""
        self._attached()
        region = self.region
        base, length = region.base, region.length
        if segment is not None:
            info = self.segment(segment)
            base, length = base + info.host_offset, info.host_blocks * info.host_block_stride
        array = (ctypes.c_uint8 * length).from_address(base)
        array._hugepin_worker = self  # the mapping lives as long as any view of it
        self._views[id(array)] = array
        return memoryview(array).cast("B")

    def host_tensor(self, segment: int | None = None, dtype=None, shape=None):
        """A CPU torch tensor over the region (segment None) or over one KV segment, no copy; see
        hugepin.tensors.host_tensor. Imports torch."""
        from hugepin import tensors

        return tensors.host_tensor(self, segment, dtype, shape)

    # ---------------------------------------------------------------- GPU and copies

    def pin(self, device) -> None:
        """Page-locks the region and maps it for GPU `device` (an index, 'cuda:N' or a torch.device):
        cudaHostRegister in chunks of at most 64 GiB, in parallel. Once pinned, torch sees tensors
        over the region as pinned (is_pinned()). NoDeviceError when this build has no CUDA or the
        device cannot be used; a failure leaves nothing pinned."""
        index = _args.device_index(device)
        self._check(_abi.lib.hugepin_worker_pin(self._handle, index))

    def set_device_kv(self, segments, backend=Backend.AUTO) -> None:
        """Builds the copy engine over the engine's own device KV: one entry per segment of the
        arena, in its order, each a DeviceSegment or a torch tensor whose first dimension indexes
        blocks (hugepin.tensors.device_segment); a FlashAttention (2, num_blocks, ...) layer gives
        two: list(kv.unbind(0)). `backend`: Backend or 'auto', 'gpu', 'host'. The tensors are kept
        alive here while the engine points into them. Calling it again replaces the engine, after
        its copies and (GPU) the whole device are done: do it at set-up, not between steps.
        InvalidArgumentError names the segment whose device, layout or bytes per block is wrong;
        nothing changes then."""
        backend = _backend(backend)
        effective = backend
        if backend == Backend.AUTO:
            effective = Backend.GPU if self.region.pinned else Backend.HOST
        described, kept = [], []
        for i, segment in enumerate(segments):
            if isinstance(segment, DeviceSegment):
                described.append(segment)
                continue
            torch = sys.modules.get("torch")
            if torch is None or not isinstance(segment, torch.Tensor):
                raise InvalidArgumentError(f"segments[{i}] is a {type(segment).__name__}: give a "
                                           "hugepin.DeviceSegment or a torch.Tensor")
            from hugepin import tensors

            tensors.check_device(segment, effective, self.region.device, f"segments[{i}]")
            described.append(tensors.device_segment(segment, f"segments[{i}]"))
            kept.append(segment)
        array = (_abi.DeviceSegment * max(1, len(described)))()
        for i, segment in enumerate(described):
            array[i] = _abi.DeviceSegment(segment.device_base, segment.block_stride, segment.blocks,
                                          segment.bytes_per_block)
        self._check(_abi.lib.hugepin_worker_set_device_kv(self._handle, array, len(described), int(backend)))
        self._device_kv = kept

    def store(self, job: int, pairs, stream=None) -> None:
        """Enqueues job `job`'s copies device -> host and returns; the job's copy-complete report is
        posted when they have landed. `pairs`: an N x 2 int64 array (numpy or a CPU torch tensor) of
        (device block, host block); host block of (chunk c, block b) = c * blocks_per_chunk + b.
        `stream`: a torch.cuda.Stream or a raw cudaStream_t (the copies wait for what was queued on
        it before; torch's default stream, handle 0, included), or None: the worker's own stream,
        which waits for nothing. A bad pair raises OutOfRangeError naming it, and nothing is copied
        or posted."""
        self._launch(_store, job, pairs, stream)

    def load(self, job: int, pairs, stream=None) -> None:
        """Enqueues job `job`'s copies host -> device, as store(); pairs are (host block, device block)."""
        self._launch(_load, job, pairs, stream)

    def _launch(self, call, job, pairs, stream) -> None:
        if type(job) is not int or job <= 0:
            job = _args.job_id(job)
        address, count = _args.block_pairs(pairs)
        rc = call(self._handle, job, address, count, _args.stream_handle(stream))
        if rc < 0:
            self._copy_refused(rc, pairs)

    def _copy_refused(self, rc: int, pairs) -> None:
        error = _abi.failure(rc)
        self._attached()
        if isinstance(error, OutOfRangeError):
            negative = _args.first_negative_pair(pairs)
            if negative is not None:
                raise OutOfRangeError(f"{negative}: block indices are never negative") from None
        raise error

    def post_done(self, job: int, error: int = 0) -> None:
        """Posts job `job`'s report without copying: copy-complete when `error` is 0, else copy-failed
        with `error` (a positive errno, e.g. errno.EIO). For a job this rank will not launch (its
        request was refused, or the bytes moved by other means), so that the job settles at the
        scheduler instead of holding its chunks. A job launched here reports by itself; posting for
        it too is a second report, which the scheduler rejects. InvalidArgumentError for job 0 or a
        negative error."""
        if type(error) is not int or error < 0:
            raise InvalidArgumentError(f"error = {error!r}: give 0 or a positive errno")
        self._check(_abi.lib.hugepin_worker_post_done(self._handle, _args.job_id(job), error))

    def release(self, epoch: int, stream=None) -> None:
        """Reports that this rank's GPU work up to `epoch` is done, once every copy launched before
        this call has landed and, with `stream`, once the stream reaches this point. Epochs increase."""
        self._check(_abi.lib.hugepin_worker_release(self._handle, _args.integer(epoch, "epoch"),
                                                    _args.stream_handle(stream)))

    def heartbeat(self) -> None:
        """Records a heartbeat (what a scheduler with a heartbeat timeout, hugepind and the inspector read)."""
        self._check(_abi.lib.hugepin_worker_heartbeat(self._handle))

    def finished(self, max_jobs: int | None = None) -> list[JobResult]:
        """Takes the results of jobs whose copies have landed since the last call, oldest first
        (at most max_jobs). Does not wait."""
        results = []
        batch = (_abi.JobResult * 64)()
        count = ctypes.c_size_t()
        while max_jobs is None or len(results) < max_jobs:
            want = 64 if max_jobs is None else min(64, max_jobs - len(results))
            self._check(_abi.lib.hugepin_worker_finished(self._handle, batch, want, ctypes.byref(count)))
            for i in range(count.value):
                values = _abi.fields(batch[i])
                values["kind"] = JobKind(values["kind"])
                results.append(JobResult(**values))
            if count.value < want:
                break
        return results

    def wait(self, job: int, timeout: float | None = None) -> bool:
        """Waits until job `job`'s copies have landed: True, or False when `timeout` seconds pass
        first (None: no limit). The job stays in finished()'s list. NotFoundError for a job this
        worker never launched."""
        rc = _abi.lib.hugepin_worker_wait(self._handle, _args.job_id(job), _args.timeout_ns(timeout))
        if rc == -110:  # ETIMEDOUT
            return False
        self._check(rc)
        return True

    def completion_fd(self) -> int:
        """A descriptor that turns readable when jobs land (for an event loop; read 8 bytes to reset
        it). Owned by the worker."""
        fd = ctypes.c_int()
        self._check(_abi.lib.hugepin_worker_completion_fd(self._handle, ctypes.byref(fd)))
        return fd.value

    # ---------------------------------------------------------------- lifetime

    def detach(self) -> None:
        """Detaches: waits for every copy in flight, unpins, unmaps, gives the rank back. BusyError,
        changing nothing, while buffers, arrays or tensors over the region live. A forked child
        never detaches its parent's worker (it only forgets it). Detaching twice is a no-op."""
        if self._handle is None:
            return
        if os.getpid() != self._pid:
            self._handle = None
            return
        if len(self._views) > 0:
            gc.collect()  # views that only a reference cycle kept
        if len(self._views) > 0:
            raise BusyError(f"rank {self.rank} of arena '{self.arena}': its region is still viewed by "
                            f"{len(self._views)} buffer(s) (arrays or tensors over it): drop them before detaching")
        handle, self._handle = self._handle, None
        self._device_kv = []
        _abi.check(_abi.lib.hugepin_worker_detach(handle))

    close = detach

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exception) -> None:
        self.detach()

    def __del__(self):
        # Only once no view lives (each holds the worker), so nothing can touch the mapping after.
        handle = getattr(self, "_handle", None)
        if handle is not None and os.getpid() == self._pid:
            self._handle = None
            _abi.lib.hugepin_worker_detach(handle)

    def __repr__(self) -> str:
        state = f"rank {self.rank}" if self._handle is not None else "detached"
        return f"<hugepin.Worker arena '{self.arena}' tp {self.tp_rank} pp {self.pp_rank}: {state}>"

    def _attached(self) -> None:
        if self._handle is None:
            raise InvalidArgumentError(f"the worker of tp_rank {self.tp_rank}, pp_rank {self.pp_rank} of arena "
                                       f"'{self.arena}' is detached")

    def _check(self, rc: int) -> None:
        if rc < 0:
            self._attached()
            raise _abi.failure(rc)


def attach(arena: str, tp_rank: int, pp_rank: int = 0, **options) -> Worker:
    """Worker(arena, tp_rank, pp_rank, **options): attaches a rank of an arena."""
    return Worker(arena, tp_rank, pp_rank, **options)


def _backend(value) -> Backend:
    if isinstance(value, str):
        try:
            return Backend[value.upper()]
        except KeyError:
            pass
    elif isinstance(value, int):
        try:
            return Backend(value)
        except ValueError:
            pass
    raise InvalidArgumentError(f"backend = {value!r}: give hugepin.Backend or 'auto', 'gpu', 'host'")
