"""The plug-in in each rank's worker process: vLLM's block ids onto hugepin chunks, copies on the rank's
hugepin.Worker, results back to vLLM.

RankCopier does the work; vLLM reaches it through HugepinOffloadingWorker (the current generation's
OffloadingWorker: submit_store, submit_load, get_finished, wait) or through the two
HugepinOffloadingHandlers of the handlers generation (transfer_async per direction).

Life of a rank:
- get_worker / get_handlers (vLLM's register_kv_caches): the canonical KV tensors become the rank's
  KV segments, in order (a FlashAttention layer's K and V are two). The rank's planner entry is
  written to the rendezvous folder, and a thread waits for the scheduler process to publish the
  arena, then attaches the rank, pins its region for the tensors' GPU and builds the copy engine
  over them (the host-memcpy backend for CPU tensors). vLLM goes on meanwhile: its scheduler
  process is made after the workers' KV.
- submit_*: the host spec names chunks and the hugepin job the manager dispatched over them; host
  block (chunk c, block b) = c * blocks_per_chunk + b, paired in order with the GPU blocks (the
  first skipped when vLLM's block_indices starts mid-chunk). On a GPU the copies run on a
  low-priority stream of the plug-in's that first waits for the current stream (so a store reads
  what the model wrote, a load overwrites blocks the model is done with). When the copies land,
  the library posts the job's report to the scheduler through the rank's ring itself; a request
  this rank refuses is reported failed (Worker.post_done), so the job settles either way.
- get_finished: the jobs whose copies landed, as vLLM's TransferResult with the bytes this rank
  moved and the time (the copies' own GPU time with hugepin_time_copies, else launch to landing).
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections import deque
from dataclasses import fields

import numpy as np

import hugepin
from hugepin.errors import InvalidArgumentError, TimedOutError
from hugepin.vllm import interface
from hugepin.vllm.load_store_spec import HugepinLoadStoreSpec
from hugepin.vllm.rendezvous import Rendezvous, _alive

logger = logging.getLogger("hugepin.vllm")

_TRANSFER_FIELDS = {f.name for f in fields(interface.TransferResult)}


def kv_segments(kv_caches) -> list:
    """The canonical KV tensors of `kv_caches` (vLLM's CanonicalKVCaches), each (num_blocks, ...)
    with one block contiguous. InvalidArgumentError for more than one KV cache group (hybrid
    models), no tensors, or tensors of different block counts or devices."""
    tensors = [entry.tensor for entry in kv_caches.tensors]
    groups = [refs for refs in kv_caches.group_data_refs if refs]
    if not tensors:
        raise InvalidArgumentError("kv_caches has no tensors: nothing to offload")
    if len(groups) > 1:
        raise InvalidArgumentError(f"kv_caches has {len(groups)} KV cache groups: hugepin.vllm offloads models of one "
                                   "group (no hybrid attention/state models yet)")
    if len({t.shape[0] for t in tensors}) != 1 or len({str(t.device) for t in tensors}) != 1:
        raise InvalidArgumentError("kv_caches' tensors differ in block count or device: "
                                   f"{[(tuple(t.shape), str(t.device)) for t in tensors]}")
    return tensors


def planner_entry(tensors, tp_rank: int, pp_rank: int) -> dict:
    """The rank's entry of the planner input: one storage per canonical tensor, each one segment of
    its block's bytes, and the GPU's PCI address when the tensors are on a GPU (its NUMA node
    places the region)."""
    num_blocks = int(tensors[0].shape[0])
    described = []
    for i, tensor in enumerate(tensors):
        block = tensor[0].numel() * tensor.element_size()
        described.append({"name": f"kv.{i}", "shape": [num_blocks, block], "strides": [block, 1], "element_size": 1,
                          "storage": f"kv.{i}"})
    entry = {"tp_rank": tp_rank, "pp_rank": pp_rank, "num_blocks": num_blocks, "tensors": described}
    pci = _gpu_pci(tensors[0].device)
    if pci:
        entry["gpu_pci"] = pci
    return entry


def _gpu_pci(device) -> str | None:
    if device.type != "cuda":
        return None
    import torch

    properties = torch.cuda.get_device_properties(device)
    bus = getattr(properties, "pci_bus_id", None)
    if bus is None:
        return None
    return f"{getattr(properties, 'pci_domain_id', 0):04x}:{bus:02x}:{getattr(properties, 'pci_device_id', 0):02x}.0"


class RankCopier:
    """One rank's side of the plug-in (module docs). `layout` is the spec's EngineLayout, `options`
    its Options, `arena` the arena's name. One thread submits (vLLM's worker thread)."""

    def __init__(self, layout, options, arena: str, kv_caches):
        self.tp_rank, self.pp_rank = layout.rank % layout.tp, layout.rank // layout.tp
        self.rank = layout.rank
        self.arena = arena
        self._tensors = kv_segments(kv_caches)
        self._device = self._tensors[0].device
        self._cuda = self._device.type == "cuda"
        self._options = options
        self._rendezvous = Rendezvous(options.rendezvous_dir, arena)
        self._rendezvous.publish_rank(self.rank, planner_entry(self._tensors, self.tp_rank, self.pp_rank))
        self._worker: hugepin.Worker | None = None
        self._error: Exception | None = None
        self._ready = threading.Event()
        self._stopping = threading.Event()
        self._streams = {}
        self._launched = {}       # hugepin job -> (vLLM job id, kind)
        self._vllm_jobs = {}      # vLLM job id -> hugepin job, until get_finished returned it
        self._landed = {hugepin.STORE: deque(), hugepin.LOAD: deque()}  # TransferResults not yet taken
        self.blocks_per_chunk = 0
        self._thread = threading.Thread(target=self._attach, name=f"hugepin-attach-{self.rank}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ attaching

    def _attach(self) -> None:
        try:
            self._wait_for_arena()
            worker = hugepin.Worker(self.arena, self.tp_rank, self.pp_rank,
                                    copy_threads=self._options.copy_threads,
                                    time_copies=self._options.time_copies and self._cuda)
            try:
                if self._cuda:
                    import torch

                    torch.cuda.set_device(self._device)
                    worker.pin(self._device)
                worker.set_device_kv(self._tensors, "gpu" if self._cuda else "host")
            except BaseException:
                worker.detach()
                raise
            self.blocks_per_chunk = worker.blocks_per_chunk
            self._worker = worker
        except Exception as error:  # noqa: BLE001 (kept: every submit reports it)
            self._error = error
            if not self._stopping.is_set():
                logger.error("hugepin.vllm rank %d: cannot attach arena '%s': %s", self.rank, self.arena, error)
        finally:
            self._ready.set()

    def _wait_for_arena(self) -> None:
        """Until the scheduler process of this engine (a live one) published the arena."""
        deadline = time.monotonic() + self._options.rendezvous_timeout
        while True:
            published = self._rendezvous.read("arena.json")
            if published and published.get("arena") == self.arena and _alive(published.get("pid")):
                return
            if time.monotonic() >= deadline:
                raise TimedOutError(f"no scheduler process published arena '{self.arena}' in "
                                    f"{self._options.rendezvous_timeout:g} s ({self._rendezvous.path})")
            if self._stopping.wait(0.02):
                raise InvalidArgumentError(f"rank {self.rank} was shut down before arena '{self.arena}' was published")

    def wait_attached(self, timeout: float | None = None) -> hugepin.Worker:
        """The rank's hugepin.Worker once attached; the attach failure, or TimedOutError."""
        if not self._ready.wait(timeout):
            raise TimedOutError(f"rank {self.rank} has not attached arena '{self.arena}' in {timeout} s")
        if self._error is not None:
            raise self._error
        return self._worker

    @property
    def worker(self) -> hugepin.Worker | None:
        """The rank's hugepin.Worker, or None before it attached."""
        return self._worker if self._ready.is_set() else None

    # ------------------------------------------------------------------ transfers

    def submit(self, kind, job_id: int, gpu_spec, host_spec) -> bool:
        """Launches vLLM job `job_id`: a store (GPU -> chunks) or a load (chunks -> GPU). False, with
        the reason logged and the hugepin job reported failed, when it cannot be launched."""
        job = getattr(host_spec, "job", 0)
        launched = False
        try:
            if not isinstance(host_spec, HugepinLoadStoreSpec):
                raise InvalidArgumentError(f"the host side is a {type(host_spec).__name__}, not a HugepinLoadStoreSpec")
            if job == 0:  # no chunks: nothing to copy, nothing to report
                self._landed[kind].append(self._result(job_id, True, 0, 0.0, kind))
                return True
            worker = self.wait_attached(self._options.rendezvous_timeout)
            pairs = self._pairs(gpu_spec, host_spec, kind == hugepin.STORE)
            stream = self._stream(kind)
            launched = True
            if kind == hugepin.STORE:
                worker.store(job, pairs, stream)
            else:
                worker.load(job, pairs, stream)
            self._launched[job] = (job_id, kind)
            self._vllm_jobs[job_id] = job
            return True
        except Exception as error:  # noqa: BLE001 (vLLM's contract: False, and the job fails)
            logger.error("hugepin.vllm rank %d: %s job %d (hugepin job %d) not launched: %s", self.rank,
                         "store" if kind == hugepin.STORE else "load", job_id, job, error)
            refused_before_copy = not launched or isinstance(error, (InvalidArgumentError, hugepin.OutOfRangeError))
            if job and self._worker is not None and refused_before_copy:
                try:
                    self._worker.post_done(job, errno.EINVAL)
                except hugepin.Error as posted:
                    logger.error("hugepin.vllm rank %d: cannot report job %d failed: %s", self.rank, job, posted)
            return False

    def _pairs(self, gpu_spec, host_spec, store: bool):
        gpu = np.asarray(gpu_spec.block_ids, dtype=np.int64).reshape(-1)
        group_sizes = getattr(gpu_spec, "group_sizes", None)
        if group_sizes is not None and sum(1 for size in group_sizes if size) > 1:
            raise InvalidArgumentError(f"GPU blocks of {len(group_sizes)} KV cache groups ({list(group_sizes)}): "
                                       "hugepin.vllm offloads models of one group")
        if getattr(gpu_spec, "block_offsets", None) is not None:
            raise InvalidArgumentError("GPU blocks given in parts (block_offsets: vLLM's hybrid chunking): "
                                       "hugepin.vllm copies whole blocks")
        indices = getattr(gpu_spec, "block_indices", None)
        skip = int(indices[0]) % self.blocks_per_chunk if indices else 0
        chunks = np.asarray(host_spec.block_ids, dtype=np.int64).reshape(-1)
        host = (chunks[:, None] * self.blocks_per_chunk + np.arange(self.blocks_per_chunk)).reshape(-1)
        host = host[skip:skip + gpu.size]
        if host.size < gpu.size:
            raise InvalidArgumentError(f"{gpu.size} GPU blocks from block {skip} of {chunks.size} chunk(s) of "
                                       f"{self.blocks_per_chunk} blocks: more blocks than the chunks hold")
        columns = (gpu, host) if store else (host, gpu)
        return np.ascontiguousarray(np.stack(columns, axis=1))

    def _stream(self, kind):
        """On a GPU: the plug-in's low-priority stream for `kind`, made to wait for the current one."""
        if not self._cuda:
            return None
        import torch

        stream = self._streams.get(kind)
        if stream is None:
            low, _ = torch.cuda.Stream.priority_range()
            stream = self._streams[kind] = torch.cuda.Stream(device=self._device, priority=low)
        stream.wait_stream(torch.cuda.current_stream(self._device))
        return stream

    def take_finished(self, kind=None) -> list:
        """TransferResults of the jobs whose copies landed since the last call (of `kind`, or all)."""
        worker = self.worker
        if worker is not None:
            for result in worker.finished():
                job_id, job_kind = self._launched.pop(result.job, (None, None))
                if job_id is None:
                    continue
                self._vllm_jobs.pop(job_id, None)
                seconds = (result.copy_ns if result.copy_ns else result.landed_ns - result.launch_ns) / 1e9
                self._landed[job_kind].append(self._result(job_id, result.error == 0, result.bytes, seconds, job_kind))
        kinds = (kind,) if kind is not None else (hugepin.STORE, hugepin.LOAD)
        taken = []
        for each in kinds:
            queue = self._landed[each]
            while queue:
                taken.append(queue.popleft())
        return taken

    def wait(self, job_ids) -> None:
        """Blocks until every launched job of `job_ids` (vLLM's ids) has landed; others are ignored."""
        worker = self.worker
        for job_id in job_ids:
            job = self._vllm_jobs.get(job_id)
            if job is None or worker is None:
                continue
            try:
                worker.wait(job, None)
            except hugepin.NotFoundError:
                pass  # taken by take_finished meanwhile

    @staticmethod
    def _result(job_id: int, success: bool, size: int, seconds: float, kind):
        values = {"job_id": job_id, "success": success, "transfer_size": size, "transfer_time": seconds}
        if "transfer_type" in _TRANSFER_FIELDS:
            values["transfer_type"] = ("GPU", "CPU") if kind == hugepin.STORE else ("CPU", "GPU")
        return interface.TransferResult(**values)

    def shutdown(self) -> None:
        """Waits for the copies in flight and detaches the rank (or stops its wait for the arena)."""
        self._stopping.set()
        self._thread.join()
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.detach()
        self._rendezvous.remove(f"rank-{self.rank}.json")


# ------------------------------------------------------------------------------------ vLLM's faces


class HugepinOffloadingWorker(interface.OffloadingWorker or object):
    """vLLM's OffloadingWorker (current generation) over a RankCopier."""

    def __init__(self, copier: RankCopier):
        self.copier = copier

    def submit_store(self, job_id: int, src_spec, dst_spec) -> bool:
        return self.copier.submit(hugepin.STORE, job_id, src_spec, dst_spec)

    def submit_load(self, job_id: int, src_spec, dst_spec) -> bool:
        return self.copier.submit(hugepin.LOAD, job_id, dst_spec, src_spec)

    def get_finished(self) -> list:
        return self.copier.take_finished()

    def wait(self, job_ids: set[int]) -> None:
        self.copier.wait(job_ids)

    def shutdown(self) -> None:
        self.copier.shutdown()


class HugepinOffloadingHandler(interface.OffloadingHandler or object):
    """vLLM's OffloadingHandler (handlers generation) for one direction, over a RankCopier shared by
    both directions' handlers."""

    def __init__(self, copier: RankCopier, kind):
        self.copier, self.kind = copier, kind

    def transfer_async(self, job_id: int, spec) -> bool:
        src, dst = spec
        if self.kind == hugepin.STORE:
            return self.copier.submit(hugepin.STORE, job_id, src, dst)
        return self.copier.submit(hugepin.LOAD, job_id, dst, src)

    def get_finished(self) -> list:
        return self.copier.take_finished(self.kind)

    def wait(self, job_ids: set[int]) -> None:
        self.copier.wait(job_ids)

    def shutdown(self) -> None:
        if self.kind == hugepin.STORE:  # the copier is shared: one of the two handlers shuts it down
            self.copier.shutdown()
